"""One rank of `kitchen run --nproc N` (or `kitchen serve --nproc N`), as torch.distributed.run
starts it: the same command again, read from the environment (the launcher's parser would take our
flags for its own)."""

from __future__ import annotations

import json
import os
import signal
import sys

from kitchen.adapters.local.distributed.launch import ARGV_ENV, LAUNCHER_ENV
from kitchen.app.cli import main


def end_with_the_launcher() -> None:
    """Linux: SIGTERM to this rank when the launcher that started it dies. A launcher stopped by a
    signal hands it on to every rank, but one killed with SIGKILL cannot, and its ranks, in sessions
    of their own, would keep running (a server on its port). Rank 0 then ends as on Ctrl-C and tells
    the others, which ignore SIGTERM (worker.py), to stop."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    pr_set_pdeathsig = 1
    ctypes.CDLL(None).prctl(pr_set_pdeathsig, signal.SIGTERM)
    if str(os.getppid()) != os.environ.get(LAUNCHER_ENV):  # it died before we asked
        os.kill(os.getpid(), signal.SIGTERM)


if __name__ == "__main__":
    end_with_the_launcher()
    sys.argv = ["kitchen", *json.loads(os.environ[ARGV_ENV])]
    main()
