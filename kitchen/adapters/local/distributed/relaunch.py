"""`--nproc N` (and --nnodes, --node-rank, --rdzv-endpoint): the same command again, as N ranks
started by torch.distributed.run, which ends every rank when one fails."""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import shutil
import signal
import sys
import tempfile
import time
from dataclasses import dataclass

from kitchen.adapters.local.distributed.world import ENV_FLAG, STALL_FILE_ENV, STALLED_EXIT
from kitchen.engine.cores import parent_pid, rank_threads, usable_cores
from kitchen.engine.errors import ConfigError

ARGV_ENV = "KITCHEN_RANK_ARGV"
LAUNCHER_ENV = "KITCHEN_LAUNCHER_PID"  # the process that started the ranks (rank.py)
MALLOC_ENV = "MALLOC_MMAP_THRESHOLD_"


# What stops torch.distributed.run: it hands the signal on to every rank (handlers of its own).
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT)


@dataclass(frozen=True)
class Launch:
    """The ranks of a run, as `--nproc`, `--nnodes`, `--node-rank` and `--rdzv-endpoint` (or the
    Python API's options of the same names) give them; a bad value is refused in one line."""

    nproc: int = 1
    nnodes: int = 1
    node_rank: int = 0
    rdzv_endpoint: str | None = None

    def __post_init__(self) -> None:
        for name, least in (("nproc", 1), ("nnodes", 1), ("node_rank", 0)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                flag = "--" + name.replace("_", "-")
                raise ConfigError(
                    f"{name} ({flag}): expected a whole number >= {least}, got {value!r}"
                )
        if self.node_rank >= self.nnodes:
            raise ConfigError(
                f"node_rank (--node-rank) {self.node_rank}: expected below nnodes ({self.nnodes}); "
                "machines count from 0"
            )
        if self.nnodes > 1 and not self.rdzv_endpoint:
            raise ConfigError(
                f"nnodes (--nnodes) {self.nnodes}: the machines need rdzv_endpoint "
                "(--rdzv-endpoint), the host:port where they meet"
            )
        if self.rdzv_endpoint is not None and ":" not in self.rdzv_endpoint:
            raise ConfigError(
                f"rdzv_endpoint (--rdzv-endpoint): expected host:port (got {self.rdzv_endpoint!r})"
            )

    @property
    def distributed(self) -> bool:
        return self.nproc * self.nnodes > 1


def _one_gpu_a_rank(nproc: int) -> None:
    """NCCL, which the ranks take wherever torch sees a GPU, refuses two ranks on one GPU (and
    rank R asks for GPU R): refused here in one line, before any rank starts."""
    import torch

    if torch.cuda.is_available() and nproc > (gpus := torch.cuda.device_count()):
        raise ConfigError(
            f"nproc (--nproc) {nproc}: ranks on CUDA take a GPU each and this machine has "
            f"{gpus} visible: --nproc {gpus} at most, or CUDA_VISIBLE_DEVICES= to run the "
            "ranks on the CPU"
        )


def relaunched() -> bool:
    """True in a rank that launch started (it must not launch again)."""
    return bool(os.environ.get(ENV_FLAG))


def _close_rendezvous(stop: BaseException) -> None:
    """Shut down the rendezvous that torch.distributed.run leaves open on a signal: its keep-alive
    thread holds the handler for each heartbeat, so the handler could be freed on that thread, whose
    finalizer then joins itself ("cannot join current thread" on the way out, 1 run in 20). The
    handler is the one launch_agent's frame held when the signal unwound it (torch 2.13); where no
    frame has it, nothing is done."""
    tb = stop.__traceback__
    while tb is not None:
        spec = tb.tb_frame.f_locals.get("spec")
        handler = getattr(spec, "rdzv_handler", None)
        if handler is not None:
            # On the way out after a signal: a rendezvous that cannot close changes nothing.
            with contextlib.suppress(Exception):
                handler.shutdown()
            return
        tb = tb.tb_next


def _started_ranks() -> list[int]:
    """The ranks this process started that still run: its children whose environment names it as
    their launcher (Linux; elsewhere none are found)."""
    me = os.getpid()
    mark = f"{LAUNCHER_ENV}={me}".encode()
    pids = []
    for entry in os.scandir("/proc") if os.path.isdir("/proc") else ():
        if not entry.name.isdigit() or parent_pid(int(entry.name)) != me:
            continue
        try:
            with open(f"/proc/{entry.name}/environ", "rb") as f:
                if mark in f.read().split(b"\0"):
                    pids.append(int(entry.name))
        except OSError:
            continue  # gone, or not ours to read
    return pids


def _running(child: int) -> bool:
    """False once `child` has ended (and is reaped here)."""
    try:
        return os.waitpid(child, os.WNOHANG) == (0, 0)
    except ChildProcessError:
        return False


def _stop_untracked_ranks(sig: int) -> None:
    """Hand `sig` to the ranks torch.distributed.run did not: a signal while it starts them stops
    it before it holds them (its handlers are built in one expression), so the ones already started
    would run on. As the launcher does, a rank still there after its shutdown timeout is killed."""
    grace_s = float(os.environ.get("TORCH_ELASTIC_SHUTDOWN_TIMEOUT", "30"))
    pids = _started_ranks()
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, sig)  # each rank leads a session of its own, as torch's close does
    deadline = time.monotonic() + grace_s
    while pids := [pid for pid in pids if _running(pid)]:
        if time.monotonic() > deadline:
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pid, signal.SIGKILL)
            deadline = math.inf
        time.sleep(0.05)


def relaunch(launch: Launch, argv: list[str], entry: str) -> int:
    """Run `kitchen *argv` as launch.nproc ranks on this machine, each rank as `python -m entry`
    (a module of the app, which an adapter must not import); the exit code of the run. A rank that
    fails is named in one line (a rank that gave up on a stopped rank has named that one in its own,
    world.py). A signal that stops the launcher (Ctrl-C, SIGTERM) is handed on to every rank,
    which it waits for (a rank still there after 30 s is killed): 128 + the signal."""
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import parse_args, run

    _one_gpu_a_rank(launch.nproc)

    args = [f"--nproc-per-node={launch.nproc}", f"--nnodes={launch.nnodes}"]
    if launch.rdzv_endpoint is None and launch.nnodes == 1:
        args.append("--standalone")
    else:
        args += [f"--node-rank={launch.node_rank}", f"--rdzv-endpoint={launch.rdzv_endpoint}"]
    env = {
        ENV_FLAG: str(launch.nproc),
        # The command goes by the environment: torch.distributed.run's parser would take flags
        # of ours that abbreviate or repeat its own (--nproc, --log-dir) after the module name.
        ARGV_ENV: json.dumps(argv),
        LAUNCHER_ENV: str(os.getpid()),
        # Ranks on one machine split its cores; each also waits passively (kitchen/engine/cores.py).
        "OMP_NUM_THREADS": rank_threads(os.environ, usable_cores(), launch.nproc),
        # glibc gives every freed block over 1 MiB back to the system at once. By default its
        # threshold rises to the largest block freed, so the layers a rank gathers and frees at
        # every pass stay in its heap: SmolLM2 at N=2, peak resident memory 2942 -> 2064 MiB on
        # rank 0 (docs/distributed.md, Measured). Ignored where the C library is not glibc.
        MALLOC_ENV: os.environ.get(MALLOC_ENV) or str(2**20),
        # where a rank that gave up on a stopped one says so (world.py)
        STALL_FILE_ENV: os.path.join(tempfile.mkdtemp(prefix="kitchen-ranks-"), "stalled"),
    }
    # The failure (or the stop) is said once, below and by rank 0: not again in the launcher's
    # own log lines. Each of its modules' loggers has a level of its own, set at import.
    for name in list(logging.root.manager.loggerDict):
        if name.startswith("torch.distributed.elastic"):
            logging.getLogger(name).setLevel(logging.CRITICAL)
    saved = {key: os.environ.get(key) for key in env}
    handlers = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}
    os.environ.update(env)  # the ranks inherit this process's environment
    try:
        run(parse_args([*args, "-m", entry]))
    except SignalException as e:
        _close_rendezvous(e)
        _stop_untracked_ranks(e.sigval)
        return 128 + int(e.sigval)
    except ChildFailedError as e:
        rank, failure = e.get_first_failure()
        # A rank that gave up on a stopped one has named it (and may have killed it: the failure
        # seen first can be that kill's).
        if failure.exitcode == STALLED_EXIT or os.path.exists(env[STALL_FILE_ENV]):
            return 1
        print(
            f"error: rank {rank} of {launch.nproc * launch.nnodes} failed "
            f"(exit code {failure.exitcode}); every rank was stopped",
            file=sys.stderr,
        )
        return 1
    finally:
        shutil.rmtree(os.path.dirname(env[STALL_FILE_ENV]), ignore_errors=True)
        # The launcher's handlers would raise in this process after it: this process's come back.
        for sig, handler in handlers.items():
            if handler is not None:
                signal.signal(sig, handler)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    return 0
