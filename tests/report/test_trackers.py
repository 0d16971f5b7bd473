"""Trackio and Neptune sinks in their offline modes, fed a real run's metrics: each keeps the keys
and steps metrics.jsonl has. Each runs in a fresh interpreter (trackio reads TRACKIO_DIR at
import; neptune writes .neptune/ into the working directory). Skipped where the package is absent."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from kitchen.app.report.rundata import read_jsonl
from kitchen.app.sinks import RunSink
from kitchen.app.trackers import NeptuneSink, numeric, open_trackers, trackio_sink
from kitchen.engine.errors import ConfigError

FEED = """
import json, sys
from kitchen.app.trackers import open_trackers
config = json.loads(sys.argv[1])
(sink,) = open_trackers(config)
for line in open(sys.argv[2]):
    record = json.loads(line)
    sink.log({k: v for k, v in record.items() if k != "step"}, record["step"])
sink.close()
"""


def expected(metrics: Path) -> dict[str, list[tuple[int, float]]]:
    out: dict[str, list[tuple[int, float]]] = {}
    for record in read_jsonl(metrics).records:
        for key, value in numeric({k: v for k, v in record.items() if k != "step"}).items():
            out.setdefault(key, []).append((record["step"], value))
    return out


def feed(config: dict, metrics: Path, cwd: Path, **env: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", FEED, json.dumps(config), str(metrics)],
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(Path.cwd()), **env},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]


@pytest.mark.skipif(
    importlib.util.find_spec("trackio") is None,
    reason="trackio is not installed (pip install 'kitchen[trackio]')",
)
@pytest.mark.slow  # launches a process
def test_trackio_keeps_the_metrics_jsonl_keys_and_steps(runs, tmp_path):
    metrics = runs["sl"] / "metrics.jsonl"
    config = {"trackio_project": "kitchen-test", "wandb_name": "sl", "learning_rate": 2e-4}
    feed(config, metrics, tmp_path, TRACKIO_DIR=str(tmp_path / "trackio"))
    read = (
        "import json; from trackio.sqlite_storage import SQLiteStorage as S; "
        "print(json.dumps([S.get_logs('kitchen-test', 'sl'), S.get_run_config('kitchen-test', 'sl')]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", read],
        env={**os.environ, "TRACKIO_DIR": str(tmp_path / "trackio")},
        capture_output=True,
        text=True,
        check=True,
    )
    logs, run_config = json.loads(out.stdout.splitlines()[-1])
    got: dict[str, list[tuple[int, float]]] = {}
    for row in logs:
        for key, value in row.items():
            if key not in ("step", "timestamp"):
                got.setdefault(key, []).append((row["step"], value))
    assert got == expected(metrics)
    assert run_config["learning_rate"] == 2e-4


READ_NEPTUNE = """
import json, sys
from pathlib import Path
from typing import Any
from neptune_scale.sync.operations_repository import OperationsRepository
metrics, configs = {}, {}
for op in OperationsRepository(Path(sys.argv[1])).get_operations(10**9):
    update = op.operation
    for key, value in getattr(update, "append", {}).items():
        metrics.setdefault(key, []).append((update.step.whole, value.float64))
    for key, value in getattr(update, "assign", {}).items():
        configs[key] = getattr(value, value.WhichOneof("value"))
print(json.dumps([metrics, configs]))
"""


@pytest.mark.skipif(
    importlib.util.find_spec("neptune_scale") is None,
    reason="neptune-scale is not installed (pip install 'kitchen[neptune]')",
)
@pytest.mark.slow  # launches a process
def test_neptune_offline_keeps_the_metrics_jsonl_keys_and_steps(runs, tmp_path):
    metrics = runs["rl"] / "metrics.jsonl"  # has both `progress` and `progress/batch`
    config = {"neptune_project": "kitchen/test", "wandb_name": "rl", "group_size": 8}
    feed(config, metrics, tmp_path, NEPTUNE_MODE="offline")
    (db,) = (tmp_path / ".neptune").glob("*/run_operations.sqlite3")
    out = subprocess.run(
        [sys.executable, "-c", READ_NEPTUNE, str(db)], capture_output=True, text=True, check=True
    )
    got, configs = json.loads(out.stdout)
    assert {k: [tuple(p) for p in v] for k, v in got.items()} == expected(metrics)
    assert configs["group_size"] == 8


def test_no_project_no_tracker():
    assert open_trackers({"trackio_project": None, "neptune_project": None}) == []


def test_a_missing_package_is_a_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "trackio", None)  # import trackio now raises
    monkeypatch.setitem(sys.modules, "neptune_scale", None)
    with pytest.raises(ConfigError, match=r"pip install 'kitchen\[trackio\]'"):
        trackio_sink("p", None, {})
    with pytest.raises(ConfigError, match=r"pip install 'kitchen\[neptune\]'"):
        NeptuneSink("p", None, {})


def test_a_wandb_style_run_gets_the_config_every_step_and_a_finish() -> None:
    calls: list[tuple[str, Any]] = []

    class Run:
        def log(self, metrics: dict[str, Any], step: int) -> None:
            calls.append(("log", (metrics, step)))

        def finish(self) -> None:
            calls.append(("finish", None))

    def init(**kwargs: Any) -> Run:
        calls.append(("init", kwargs))
        return Run()

    for keep, logged in ((dict, {"loss": 0.5, "note": "nan"}), (numeric, {"loss": 0.5})):
        calls.clear()
        sink = RunSink(init, "proj", "run", {"lr": 1e-4}, keep=keep)
        sink.log({"loss": 0.5, "note": "nan"}, 3)
        sink.close()
        assert calls == [
            ("init", {"project": "proj", "name": "run", "config": {"lr": 1e-4}}),
            ("log", (logged, 3)),
            ("finish", None),
        ]


def test_a_resumed_run_continues_its_wandb_run(tmp_path: Path, monkeypatch: Any) -> None:
    """The W&B id is kept in the run directory: `--if-exists resume` passes it back to
    wandb.init with resume="allow" (one W&B run, not two); `--if-exists delete` starts anew."""
    from kitchen.adapters.fake import FakeBackend
    from kitchen.app.launch import run

    inits: list[dict[str, Any]] = []
    logged: list[tuple[str, int]] = []

    class Run:
        def __init__(self, run_id: str) -> None:
            self.run_id = run_id

        def log(self, metrics: dict[str, Any], step: int) -> None:
            logged.append((self.run_id, step))

        def finish(self) -> None:
            pass

    def init(**kwargs: Any) -> Run:
        inits.append(kwargs)
        return Run(kwargs.get("id", "?"))

    monkeypatch.setitem(sys.modules, "wandb", SimpleNamespace(init=init))
    overrides = {
        "model_name": "kitchen/tiny-llama", "batch_size": 4, "save_every": 1,
        "test_dataset": None, "num_samples_to_show": 0, "no_register": True,
        "wandb_project": "kitchen-test", "wandb_name": "sl",
    }  # fmt: skip
    first = FakeBackend()
    run("sl_basic", overrides, backend=first, log_dir=tmp_path, max_steps=2)
    again = FakeBackend(states=first.states)
    run("sl_basic", overrides, backend=again, log_dir=tmp_path, max_steps=4, if_exists="resume")
    run(
        "sl_basic",
        overrides,
        backend=FakeBackend(),
        log_dir=tmp_path,
        max_steps=1,
        if_exists="delete",
    )

    original, resumed, fresh = inits
    kept = (tmp_path / "wandb_run_id").read_text().strip()
    assert original["id"] and "resume" not in original
    assert resumed["id"] == original["id"] and resumed["resume"] == "allow"
    assert resumed["project"] == "kitchen-test" and resumed["name"] == "sl"
    assert fresh["id"] != original["id"] and "resume" not in fresh and kept == fresh["id"]
    steps = [step for run_id, step in logged if run_id == original["id"]]
    assert max(steps) == 3 and 2 in steps  # the resumed run logged steps 2 and 3 into the same run
