"""Rolling checkpoints (`rolling_save_every`, `rolling_keep`): the newest `keep` resume-only
states stay on disk and in checkpoints.jsonl, older ones are retired (recorded, then deleted), and
a run SIGKILLed at a step's end resumes from the rolling one before and ends as a run never
killed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kitchen.app.launch import run
from kitchen.app.rundir import resume_record
from kitchen.engine.runner import BaseHook
from tests.resume.cases import assert_same_run, cases, metrics_by_step
from train_core.checkpoint import live_checkpoint_records, load_checkpoint_records

ROOT = Path(__file__).resolve().parents[2]
STEPS = 5
KEEP = 2


def _config(tmp_path: Path) -> tuple[str, dict[str, Any]]:
    recipe, overrides = cases(tmp_path)["supervised"]
    # a periodic checkpoint at step 4: the rolling one is skipped there, as the cookbook does
    return recipe, {**overrides, "save_every": 4, "rolling_save_every": 1, "rolling_keep": KEEP}


def _rolling_on_disk(log_dir: Path) -> list[str]:
    return sorted(
        p.name for p in (log_dir / "checkpoints" / "weights").iterdir() if p.name != "final"
    )


def _live_rolling(log_dir: Path) -> list[str]:
    return [r.name for r in live_checkpoint_records(log_dir) if r.get("rolling")]


class CountRolling(BaseHook):
    """At each step's end: the rolling checkpoints recorded live and the folders on disk."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir, self.seen = log_dir, []

    def on_step_end(self, step: int, metrics: object) -> None:
        self.seen.append((step, _live_rolling(self.log_dir), _rolling_on_disk(self.log_dir)))


def test_the_newest_keep_stay_and_the_final_retires_the_rest(tmp_path: Path) -> None:
    recipe, overrides = _config(tmp_path)
    log_dir = tmp_path / "run"
    counter = CountRolling(log_dir)
    run(recipe, overrides, backend="local", log_dir=log_dir, max_steps=STEPS, hooks=[counter])
    # step index s saved "0000{s+1}"; step 4 (index 3) is the periodic one's, so no rolling save
    assert counter.seen == [
        (0, ["000001"], ["000001"]),
        (1, ["000001", "000002"], ["000001", "000002"]),
        (2, ["000002", "000003"], ["000002", "000003"]),
        (3, ["000002", "000003"], ["000002", "000003", "000004"]),
        (4, ["000003", "000005"], ["000003", "000004", "000005"]),
    ]
    records = load_checkpoint_records(log_dir)
    assert records[-1].final and records[-1].get("renderer_name") == "chatml"
    assert _live_rolling(log_dir) == [] and _rolling_on_disk(log_dir) == ["000004"]
    assert all(r.get("renderer_name") == "chatml" for r in records if r.state_path)


def _child(log_dir: Path, recipe: str, overrides: dict[str, Any], kind: str, n: int) -> int:
    args = [str(log_dir), recipe, json.dumps(overrides), str(STEPS), kind, str(n)]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    proc = subprocess.run(
        [sys.executable, "-m", "tests.resume.chaos_child", *args],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=300,
    )  # fmt: skip
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()[-3000:]
    return proc.returncode


@pytest.mark.slow
def test_killed_at_a_steps_end_resumes_from_the_rolling_one_before(tmp_path: Path) -> None:
    recipe, overrides = _config(tmp_path)
    straight, killed = tmp_path / "straight", tmp_path / "killed"
    run(recipe, overrides, backend="local", log_dir=straight, max_steps=STEPS)
    # SIGKILL at the end of step index 2: its rolling checkpoint 000003 is recorded (000001
    # retired), its metrics line is not written
    _child(killed, recipe, overrides, "step", 2)
    assert _live_rolling(killed) == ["000002", "000003"] == _rolling_on_disk(killed)
    record = resume_record(killed)
    assert record is not None and record.name == "000002"  # 000003's step was never logged
    run(recipe, overrides, backend="local", log_dir=killed, max_steps=STEPS, if_exists="resume")
    assert sorted(metrics_by_step(killed)) == list(range(STEPS))
    assert_same_run(straight, killed)
    assert _rolling_on_disk(killed) == ["000004"]  # the periodic one; every rolling one retired


def _write(log_dir: Path, *records: dict[str, Any]) -> None:
    log_dir.mkdir(exist_ok=True)
    (log_dir / "checkpoints.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))


def test_a_retired_checkpoint_is_never_a_resume_point(tmp_path: Path) -> None:
    """A retirement is read before the deletion it announces; a path saved again after it (a
    resumed run redoing its steps) is live again, and replaces what it held before."""
    a, b = str(tmp_path / "w" / "000001"), str(tmp_path / "w" / "000002")
    _write(tmp_path,
           {"name": "000001", "state_path": a, "step": 1, "rolling": True},
           {"name": "000002", "state_path": b, "step": 2, "rolling": True},
           {"name": "000001", "retired_state_path": a})  # fmt: skip
    assert [r.name for r in live_checkpoint_records(tmp_path)] == ["000002"]
    (tmp_path / "metrics.jsonl").write_text('{"step": 0}\n')  # step 2's line never written
    assert resume_record(tmp_path) is None  # 000001 is gone: start over rather than load it
    _write(tmp_path,
           {"name": "000001", "state_path": a, "step": 1, "rolling": True},
           {"name": "000001", "retired_state_path": a},
           {"name": "000001", "state_path": a, "step": 1, "rolling": True, "again": True},
           {"name": "000002", "state_path": b, "step": 2, "rolling": True},
           {"name": "000002", "state_path": b, "step": 2, "rolling": True, "again": True})  # fmt: skip
    live = live_checkpoint_records(tmp_path)
    assert [(r.name, r.get("again")) for r in live] == [("000001", True), ("000002", True)]
