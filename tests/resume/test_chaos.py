"""Chaos: a run SIGKILLed at several points in a row (during a checkpoint write, between a
checkpoint and its record, half-way through a record, at the end of a step, at a random moment),
resumed after each, ends with the metrics and final weights of a run never killed. The short
chain runs in the suite; KITCHEN_LONG=1 adds several random chains."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from kitchen.app.launch import run
from tests.resume.cases import assert_same_run, cases, metrics_by_step
from tests.resume.chaos_child import KINDS

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
STEPS = 4


def _config(tmp_path: Path) -> tuple[str, dict[str, object]]:
    recipe, overrides = cases(tmp_path)["rl_sync"]
    return recipe, {**overrides, "num_batches": STEPS, "save_every": 1}


def _child(log_dir: Path, recipe: str, overrides: dict[str, object], kind: str, n: int,
           kill_after_s: float | None = None, max_steps: int = STEPS) -> int:  # fmt: skip
    """Run the chaos child to its kill (or, with `kill_after_s`, SIGKILL it then); its exit code."""
    args = [str(log_dir), recipe, json.dumps(overrides), str(max_steps), kind, str(n)]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.resume.chaos_child", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        _, err = proc.communicate(timeout=kill_after_s or 300)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGKILL)
        _, err = proc.communicate()
    if proc.returncode not in (0, -signal.SIGKILL):
        raise AssertionError(f"chaos child failed ({proc.returncode}):\n{err.decode()[-3000:]}")
    return proc.returncode


def _no_torn_lines(log_dir: Path) -> None:
    lines = (log_dir / "checkpoints.jsonl").read_text().splitlines()
    for line in lines:
        json.loads(line)  # a torn record was repaired before the next append


def _chain(tmp_path: Path, kills: list[tuple[str, int, float | None]]) -> int:
    """Kill a run at each point of `kills` in turn, resume to the end in this process, and
    compare with a run never killed. Returns how many kills really happened."""
    recipe, overrides = _config(tmp_path)
    straight, killed = tmp_path / "straight", tmp_path / "killed"
    run(recipe, overrides, backend="local", log_dir=straight, max_steps=STEPS)
    happened = 0
    for kind, n, after in kills:
        happened += _child(killed, recipe, overrides, kind, n, after) == -signal.SIGKILL
    run(recipe, overrides, backend="local", log_dir=killed, max_steps=STEPS, if_exists="resume")
    _no_torn_lines(killed)
    assert sorted(metrics_by_step(killed)) == list(range(STEPS))
    assert_same_run(straight, killed)
    leftovers = list((killed / "checkpoints").rglob(".*.tmp-*"))
    assert not leftovers, leftovers
    return happened


def test_killed_during_a_write_between_checkpoint_and_record_and_mid_record(tmp_path: Path) -> None:
    # 1st run dies writing its 2nd checkpoint; the 2nd dies after its 1st checkpoint's folder,
    # before the record; the 3rd dies half-way through its 2nd record.
    kills = [("write", 2, None), ("record", 1, None), ("torn", 2, None)]
    assert _chain(tmp_path, kills) == 3


@pytest.mark.skipif(os.environ.get("KITCHEN_LONG") != "1", reason="long chaos run: KITCHEN_LONG=1")
@pytest.mark.parametrize("seed", range(6))
def test_random_kill_chains(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    kills: list[tuple[str, int, float | None]] = []
    for _ in range(rng.randint(2, 4)):
        if rng.random() < 0.25:  # at a random moment: loading, sampling, training or saving
            kills.append(("none", 0, rng.uniform(3.0, 15.0)))
        else:
            kind = rng.choice(KINDS)
            kills.append(
                (kind, rng.randint(0, STEPS - 1) if kind == "step" else rng.randint(1, 3), None)
            )
    _chain(tmp_path, kills)
