"""A signal that stops the launcher: `relaunch` hands it on, returns 128 + the signal, and shuts
the rendezvous down. torch.distributed.run leaves it open on a signal, its keep-alive thread still
beating; when the handler happened to be freed on that thread, the exit printed "cannot join current
thread" (1 run of tests/distributed in 20). That race is rare, so the test counts the shutdown."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

# Rank 0 stops the launcher as a user's Ctrl-C or a scheduler's SIGTERM would; both ranks then
# wait to be stopped by the signal the launcher hands on.
STOPPER = """
import os, signal, time
if os.environ["RANK"] == "0":
    os.kill(int(os.environ["KITCHEN_LAUNCHER_PID"]), signal.SIGTERM)
time.sleep(60)
"""

LAUNCHER = """
import threading
from torch.distributed.elastic.rendezvous.dynamic_rendezvous import DynamicRendezvousHandler
from kitchen.adapters.local.distributed.relaunch import Launch, relaunch

shutdowns = []
shutdown = DynamicRendezvousHandler.shutdown

def counted(self):
    shutdowns.append(self)
    return shutdown(self)

DynamicRendezvousHandler.shutdown = counted
code = relaunch(Launch(nproc=2), [], "stopper")
print(code, len(shutdowns), [t.name for t in threading.enumerate()])
"""


def test_a_signal_closes_the_rendezvous(tmp_path: Path) -> None:
    (tmp_path / "stopper.py").write_text(textwrap.dedent(STOPPER))
    # The ranks run `python -m stopper` from the launcher's folder.
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, "-c", LAUNCHER],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[-2] == "143 1 ['MainThread']", done.stdout + done.stderr
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr, done.stderr
