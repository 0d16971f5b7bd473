"""With output sent to a file (CI, nohup, a job scheduler), a run prints a plain progress line at
a steady rate: step, total, the headline metric and tokens/s (issue 38: the 50-step demo printed
nothing for 47 minutes, then one line)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow  # launches a process
def test_progress_lines_reach_a_file_every_tenth_of_the_steps(tmp_path: Path) -> None:
    log = tmp_path / "out.log"
    command = [sys.executable, "-m", "kitchen.app.cli", "run", "sl_basic", "--backend", "fake",
               "-m", "kitchen/tiny-llama", "--max-steps", "12"]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with log.open("w") as out:
        done = subprocess.run(command, stdout=out, stderr=out, cwd=tmp_path, env=env, timeout=300)
    text = log.read_text()
    assert done.returncode == 0, text[-2000:]
    lines = [x for x in text.splitlines() if re.match(r"epoch\[0\]/batch \d+/50 ", x)]
    # sl_basic has 50 steps an epoch: a line after the first step, every 5th, and where it stopped
    assert [int(x.split()[1].split("/")[0]) for x in lines] == [1, 5, 10, 12], text[-2000:]
    for line in lines[1:]:  # the first step's record arrives after it (pipelined)
        assert re.search(r"train_mean_nll=[\d.]+  [\d,]+ tokens/s  \d+:\d\d:\d\d$", line), line
    assert "\r" not in text and "\x1b[" not in text  # no bar redrawn in place, no colour codes
