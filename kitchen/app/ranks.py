"""`--nproc`, `--nnodes`, `--node-rank` and `--rdzv-endpoint`: one definition of the flags that
start ranks of the local engine, for `kitchen run` and `kitchen serve`, and what a command does
with them (docs/distributed.md)."""

from __future__ import annotations

import os
import sys
from typing import Annotated

import typer

from kitchen.adapters.local.distributed.launch import Launch, relaunch, relaunched

NprocOpt = Annotated[
    int, typer.Option("--nproc", min=1, help="Ranks on this machine (local engine)")
]
NnodesOpt = Annotated[int, typer.Option("--nnodes", min=1, help="Machines of the run")]
NodeRankOpt = Annotated[int, typer.Option("--node-rank", min=0, help="This machine's index")]
RdzvEndpointOpt = Annotated[
    str | None, typer.Option("--rdzv-endpoint", help="host:port where the machines meet")
]

# What each rank runs: the command again (kitchen/app/rank.py).
ENTRY = "kitchen.app.rank"


def serve_if_other_rank() -> None:
    """In a rank that a launch started: ranks > 0 run rank 0's engine calls instead of the command,
    and this process ends when rank 0 stops; rank 0 joins the group and goes on to the command, as
    does a process outside a launch."""
    if not relaunched():
        return
    from kitchen.adapters.local.distributed.worker import serve_calls
    from kitchen.adapters.local.distributed.world import world

    here = world()
    if here is None or here.leader:
        return
    serve_calls(here)
    # This rank has left the group and has nothing left to write. Interpreter teardown would
    # destroy the C++ side (gloo's threads, the heartbeat thread's store connection) while a
    # daemon thread may still be in it: one run of the suite in three saw a rank that had
    # stopped cleanly abort there ("terminate called without an active exception", exit -6).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def start(ranks: Launch, argv: list[str] | None = None) -> int | None:
    """`kitchen *argv` (default: this command again) as `ranks`, and its exit code, when they are
    several and this process is not one of them yet; None where this process runs it itself."""
    if not ranks.distributed or relaunched():
        return None
    return relaunch(ranks, sys.argv[1:] if argv is None else argv, ENTRY)
