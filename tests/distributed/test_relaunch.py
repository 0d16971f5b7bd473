"""A signal that stops the launcher: `relaunch` hands it on, returns 128 + the signal, and shuts
the rendezvous down. torch.distributed.run leaves it open on a signal, its keep-alive thread still
beating; when the handler happened to be freed on that thread, the exit printed "cannot join current
thread" (1 run of tests/distributed in 20). That race is rare, so the test counts the shutdown.
A signal while the ranks are being started stops torch.distributed.run before it holds the ranks
already started: relaunch stops those itself (they held the launcher's pipes for their minute)."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

# Rank 0 stops the launcher as a user's Ctrl-C or a scheduler's SIGTERM would (once rank 1 is up,
# or while the launcher starts it); the ranks then wait to be stopped by the signal handed on.
STOPPER = """
import os, signal, time
if os.environ.get("STOP_DEAF"):  # as kitchen's ranks > 0, which wait for rank 0 to stop them
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
open(f"rank{os.environ['RANK']}.pid", "w").write(str(os.getpid()))
if os.environ["RANK"] == "0":
    while os.environ["STOP_WHEN"] == "running" and not os.path.exists("rank1.pid"):
        time.sleep(0.01)
    os.kill(int(os.environ["KITCHEN_LAUNCHER_PID"]), signal.SIGTERM)
time.sleep(60)
"""

LAUNCHER = """
import subprocess, sys, threading, time
from torch.distributed.elastic.rendezvous.dynamic_rendezvous import DynamicRendezvousHandler
from kitchen.adapters.local.distributed.relaunch import Launch, relaunch

shutdowns = []
shutdown = DynamicRendezvousHandler.shutdown

def counted(self):
    shutdowns.append(self)
    return shutdown(self)

DynamicRendezvousHandler.shutdown = counted
if sys.argv[1] != "running":
    popen = subprocess.Popen.__init__

    def rank_1_starts_late(self, *args, **kwargs):
        if kwargs.get("env", {}).get("LOCAL_RANK") == "1":
            time.sleep(60)  # rank 0's signal ends this wait, and the launch
        return popen(self, *args, **kwargs)

    subprocess.Popen.__init__ = rank_1_starts_late
code = relaunch(Launch(nproc=2), [], "stopper")
print(code, len(shutdowns), [t.name for t in threading.enumerate()])
"""


@pytest.mark.parametrize("when", ["running", "starting", "starting-deaf"])
def test_a_signal_stops_every_rank_and_closes_the_rendezvous(tmp_path: Path, when: str) -> None:
    (tmp_path / "stopper.py").write_text(textwrap.dedent(STOPPER))
    # The ranks run `python -m stopper` from the launcher's folder.
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1", "STOP_WHEN": when}
    if when == "starting-deaf":  # a rank that ignores the signal is killed after the timeout
        env |= {"STOP_DEAF": "1", "TORCH_ELASTIC_SHUTDOWN_TIMEOUT": "2"}
    # A rank left running holds the launcher's output open for its 60 s sleep: the timeout fails it.
    done = subprocess.run(
        [sys.executable, "-c", LAUNCHER, when],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=40,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[-2] == "143 1 ['MainThread']", done.stdout + done.stderr
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr, done.stderr
    started = sorted(p.name for p in tmp_path.glob("rank*.pid"))
    assert started == (["rank0.pid", "rank1.pid"] if when == "running" else ["rank0.pid"])
    for pid_file in tmp_path.glob("rank*.pid"):
        with pytest.raises(ProcessLookupError):
            os.kill(int(pid_file.read_text()), 0)
