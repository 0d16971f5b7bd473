"""`--nproc`, `--nnodes`, `--node-rank` and `--rdzv-endpoint`: one definition of the flags that
start ranks of the local engine, for `kitchen run` and `kitchen serve`, and what a command does
with them (docs/distributed.md)."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from kitchen.adapters.local.distributed.relaunch import Launch, relaunch, relaunched

NprocOpt = Annotated[
    int, typer.Option("--nproc", min=1, help="Ranks on this machine (local engine)")
]
NnodesOpt = Annotated[int, typer.Option("--nnodes", min=1, help="Machines of the run")]
NodeRankOpt = Annotated[int, typer.Option("--node-rank", min=0, help="This machine's index")]
RdzvEndpointOpt = Annotated[
    str | None, typer.Option("--rdzv-endpoint", help="host:port where the machines meet")
]

# What each rank runs: rank 0 the command again, the others rank 0's calls (kitchen/app/rank_entry.py).
ENTRY = "kitchen.app.rank_entry"


def start(ranks: Launch, argv: list[str] | None = None) -> int | None:
    """`kitchen *argv` (default: this command again) as `ranks`, and its exit code, when they are
    several and this process is not one of them yet; None where this process runs it itself."""
    if not ranks.distributed or relaunched():
        return None
    return relaunch(ranks, sys.argv[1:] if argv is None else argv, ENTRY)
