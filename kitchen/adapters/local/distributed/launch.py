"""`--nproc N` (and --nnodes, --node-rank, --rdzv-endpoint): the same command again, as N ranks
started by torch.distributed.run, which ends every rank when one fails."""

from __future__ import annotations

import json
import logging
import os
import sys
from dataclasses import dataclass

from kitchen.adapters.local.distributed.world import ENV_FLAG
from kitchen.engine.cores import rank_threads, usable_cores

ARGV_ENV = "KITCHEN_RANK_ARGV"


@dataclass(frozen=True)
class Launch:
    nproc: int = 1
    nnodes: int = 1
    node_rank: int = 0
    rdzv_endpoint: str | None = None

    @property
    def distributed(self) -> bool:
        return self.nproc * self.nnodes > 1


def relaunched() -> bool:
    """True in a rank that launch started (it must not launch again)."""
    return bool(os.environ.get(ENV_FLAG))


def relaunch(launch: Launch, argv: list[str], entry: str) -> int:
    """Run `kitchen *argv` as launch.nproc ranks on this machine, each rank as `python -m entry`
    (a module of the app, which an adapter must not import); the exit code of the run. A rank that
    fails is named in one line."""
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import parse_args, run

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
        # Ranks on one machine split its cores; each also waits passively (kitchen/engine/cores.py).
        "OMP_NUM_THREADS": rank_threads(os.environ, usable_cores(), launch.nproc),
    }
    # The failure is said once, below: not again in the launcher's own log lines.
    logging.getLogger("torch.distributed.elastic").setLevel(logging.CRITICAL)
    saved = {key: os.environ.get(key) for key in env}
    os.environ.update(env)  # the ranks inherit this process's environment
    try:
        run(parse_args([*args, "-m", entry]))
    except ChildFailedError as e:
        rank, failure = e.get_first_failure()
        print(
            f"error: rank {rank} of {launch.nproc * launch.nnodes} failed "
            f"(exit code {failure.exitcode}); every rank was stopped",
            file=sys.stderr,
        )
        return 1
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    return 0
