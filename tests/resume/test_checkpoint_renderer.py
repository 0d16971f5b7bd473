"""Every checkpoint record names the renderer its run rendered with; a run resuming from one with
another renderer is refused, a run loading one from another run with another renderer warns,
each in one line."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from kitchen.adapters.fake.backend import FakeBackend
from kitchen.app.launch import run
from kitchen.engine.errors import ConfigError
from tests.helpers import chat_files
from train_core.checkpoint import load_checkpoint_records, recorded_renderer


def _values(tmp_path: Path, **more: object) -> dict[str, object]:
    train, _ = chat_files(tmp_path)
    return {"dataset": train, "batch_size": 4, "save_every": 1, "no_register": True, **more}


def test_resuming_with_another_renderer_is_refused(tmp_path: Path) -> None:
    fake, log_dir = FakeBackend(), tmp_path / "run"
    run("sl_basic", _values(tmp_path), backend=fake, log_dir=log_dir, max_steps=2)
    records = load_checkpoint_records(log_dir)
    assert records and {r.get("renderer_name") for r in records} == {"chatml"}
    again = _values(tmp_path, renderer_name="llama3")
    with pytest.raises(ConfigError) as e:
        run("sl_basic", again, backend=fake, log_dir=log_dir, max_steps=3, if_exists="resume")
    assert str(e.value) == (
        f"checkpoint {records[-1].state_path} was saved by a run rendering with chatml; this run "
        "renders with llama3: resume with --renderer-name chatml, or start a new run"
    )
    same = run("sl_basic", _values(tmp_path), backend=fake, log_dir=log_dir, max_steps=3,
               if_exists="resume")  # fmt: skip
    assert same.steps == 3


def test_loading_a_checkpoint_of_another_renderer_warns(tmp_path: Path, caplog) -> None:
    """A local engine's state lies in <run>/checkpoints/weights/NAME: its run's record is found."""
    earlier = tmp_path / "earlier"
    state = earlier / "checkpoints" / "weights" / "000002"
    state.mkdir(parents=True)
    record = {"name": "000002", "state_path": str(state), "renderer_name": "llama3"}
    (earlier / "checkpoints.jsonl").write_text(json.dumps(record) + "\n")
    assert recorded_renderer(str(state)) == "llama3"
    assert recorded_renderer(f"local://{state}") == "llama3"
    assert recorded_renderer("tinker://run/weights/000002") is None
    fake = FakeBackend()
    fake.states[str(state)] = 0
    values = _values(tmp_path, load_checkpoint_path=str(state))
    with caplog.at_level(logging.WARNING, logger="kitchen"):
        run("sl_basic", values, backend=fake, log_dir=tmp_path / "run", max_steps=1)
    lines = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert lines == [
        f"checkpoint {state} was saved by a run rendering with llama3; this run renders with "
        "chatml (--renderer-name llama3 renders as it trained)"
    ]
