"""One rank of `kitchen run --nproc N` (or `kitchen serve --nproc N`), as torch.distributed.run
starts it: rank 0 runs the command again, read from the environment (the launcher's parser would
take our flags for its own); ranks > 0 run rank 0's engine calls (distributed/worker.py), without
the command line."""

from __future__ import annotations

import json
import os
import signal
import sys

from kitchen.adapters.local.distributed.relaunch import ARGV_ENV, LAUNCHER_ENV


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
    if int(os.environ.get("RANK", "0")) > 0:
        from kitchen.adapters.local.backend import LocalBackend
        from kitchen.adapters.local.distributed.worker import main as serve_rank_zero

        serve_rank_zero(LocalBackend)
    from kitchen.app.cli import main

    sys.argv = ["kitchen", *json.loads(os.environ[ARGV_ENV])]
    main()
