"""Disk full while writing metrics, a checkpoint or its record: the run stops with one line naming
the file, what was written before is intact, and a resume (space freed) ends like a run that never
failed. ENOSPC is injected at the write layer (the sink's file, the checkpoint writer, the record
append); where the machine lets an unprivileged user make a mount namespace (`unshare -rm`), one
run also fills a real size-limited tmpfs (skipped elsewhere)."""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import train_core.checkpoint as records
from kitchen.adapters.local.clients import checkpoints as folders
from kitchen.app import sinks
from kitchen.app.launch import run
from kitchen.engine.errors import KitchenError
from tests.resume.cases import assert_same_run, cases, metrics_by_step

pytestmark = pytest.mark.slow
STEPS = 4
FULL = OSError(errno.ENOSPC, "No space left on device")


def _config(tmp_path: Path) -> tuple[str, dict[str, Any]]:
    recipe, overrides = cases(tmp_path)["rl_sync"]
    return recipe, {**overrides, "num_batches": STEPS, "save_every": 1}


@pytest.fixture(scope="module")
def straight(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("straight")
    recipe, overrides = _config(tmp)
    run(recipe, overrides, backend="local", log_dir=tmp / "run", max_steps=STEPS)
    return tmp / "run"


class FillsUp:
    """A file that takes `budget` more bytes, writes part of the next line, then fails."""

    def __init__(self, file: Any, budget: int) -> None:
        self.file, self.budget = file, budget

    def write(self, text: str) -> int:
        if len(text) > self.budget:
            self.file.write(text[: self.budget // 2 + 1])
            self.file.flush()
            raise FULL
        self.budget -= len(text)
        return int(self.file.write(text))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.file, name)


def _fill_metrics(monkeypatch: pytest.MonkeyPatch) -> None:
    real_init = sinks.JsonlSink.__init__

    def init(self: sinks.JsonlSink, path: Path) -> None:
        real_init(self, path)
        self._file = FillsUp(self._file, budget=2500)  # type: ignore[assignment]

    monkeypatch.setattr(sinks.JsonlSink, "__init__", init)


def _fill_checkpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    real = folders.save_optimizer
    calls = [0]

    def save_optimizer(folder: Path, optimizer: Any) -> None:
        calls[0] += 1
        if calls[0] == 3:  # the weights of the 3rd checkpoint are written, its optimizer is not
            raise OSError(errno.ENOSPC, "No space left on device", str(folder / "optimizer.pt"))
        real(folder, optimizer)

    monkeypatch.setattr(folders, "save_optimizer", save_optimizer)


def _fill_record(monkeypatch: pytest.MonkeyPatch) -> None:
    real = records.append_checkpoint_record
    calls = [0]

    def append(log_dir: Any, record: Any) -> None:
        calls[0] += 1
        if calls[0] == 3:
            raise FULL
        real(log_dir, record)

    monkeypatch.setattr(records, "append_checkpoint_record", append)


@pytest.mark.parametrize(
    ("where", "fill", "named"),
    [
        ("metrics", _fill_metrics, "metrics.jsonl"),
        ("checkpoint", _fill_checkpoint, "checkpoints/weights/000003"),
        ("record", _fill_record, "checkpoints.jsonl"),
    ],
)
def test_disk_full_stops_cleanly_and_resume_continues(
    where: str, fill: Any, named: str, straight: Path, tmp_path: Path
) -> None:
    recipe, overrides = _config(tmp_path)
    log_dir = tmp_path / "run"
    with pytest.MonkeyPatch.context() as mp:
        fill(mp)
        with pytest.raises(KitchenError) as info:
            run(recipe, overrides, backend="local", log_dir=log_dir, max_steps=STEPS)
    message = str(info.value)
    assert "\n" not in message and "No space left on device" in message
    assert f"{log_dir}/{named}" in message or (log_dir / named).as_posix() in message, message
    # What was written before is whole: every record parses, the recorded checkpoints load.
    lines = (log_dir / "checkpoints.jsonl").read_text().splitlines()
    assert [json.loads(x)["name"] for x in lines] == [f"{i:06d}" for i in range(1, len(lines) + 1)]
    assert not list((log_dir / "checkpoints").rglob(".*.tmp-*"))
    for line in lines:
        folders.read_meta(Path(json.loads(line)["state_path"]))
    run(recipe, overrides, backend="local", log_dir=log_dir, max_steps=STEPS, if_exists="resume")
    assert sorted(metrics_by_step(log_dir)) == list(range(STEPS))
    assert_same_run(straight, log_dir)


def _can_mount_tmpfs(where: Path) -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = ["unshare", "-rm", "mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(where)]
    return subprocess.run(probe, capture_output=True).returncode == 0


def test_disk_full_on_a_small_tmpfs(straight: Path, tmp_path: Path) -> None:
    mount = tmp_path / "small"
    mount.mkdir()
    if not _can_mount_tmpfs(mount):
        pytest.skip("no unprivileged mount namespace here (unshare -rm) for a size-limited tmpfs")
    recipe, overrides = _config(tmp_path)
    root = Path(__file__).resolve().parents[2]
    args = [str(mount), "10m", str(straight), recipe, json.dumps(overrides), str(STEPS)]
    done = subprocess.run(
        ["unshare", "-rm", sys.executable, "-m", "tests.resume.small_fs_child", *args],
        cwd=root,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["problem"] is None, out["problem"]
    error = out["error"]  # 4 MB checkpoints on a 10 MB disk: the 3rd cannot be written
    assert error is not None and "\n" not in error, error
    assert f"{mount}/run/" in error and ("No space left" in error or "bytes free" in error), error
    print(f"\ndisk full on a 10 MB tmpfs: {error}")
