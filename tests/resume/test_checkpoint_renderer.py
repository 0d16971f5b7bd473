"""Every checkpoint record names the renderer its run rendered with. A run starting from one
(resume, load_checkpoint_path) with no renderer given renders as the checkpoint's run did; given
another renderer, a resuming run is refused and a loading run warns, each in one line."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from kitchen.adapters.fake.backend import FakeBackend, FakeTrainingClient
from kitchen.app.launch import run
from kitchen.engine.errors import ConfigError
from tests.helpers import chat_files
from train_core.checkpoint import load_checkpoint_records, recorded_renderer


def _values(tmp_path: Path, **more: object) -> dict[str, object]:
    train, _ = chat_files(tmp_path)
    return {"dataset": train, "batch_size": 4, "save_every": 1, "no_register": True, **more}


def _earlier_llama3_state(tmp_path: Path) -> Path:
    earlier = tmp_path / "earlier"
    state = earlier / "checkpoints" / "weights" / "000002"
    state.mkdir(parents=True)
    record = {"name": "000002", "state_path": str(state), "renderer_name": "llama3"}
    (earlier / "checkpoints.jsonl").write_text(json.dumps(record) + "\n")
    return state


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
    state = _earlier_llama3_state(tmp_path)
    assert recorded_renderer(str(state)) == "llama3"
    assert recorded_renderer(f"local://{state}") == "llama3"
    assert recorded_renderer("tinker://run/weights/000002") is None
    fake = FakeBackend()
    fake.states[str(state)] = 0
    values = _values(tmp_path, load_checkpoint_path=str(state), renderer_name="chatml")
    with caplog.at_level(logging.WARNING, logger="kitchen"):
        run("sl_basic", values, backend=fake, log_dir=tmp_path / "run", max_steps=1)
    lines = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert lines == [
        f"checkpoint {state} was saved by a run rendering with llama3; this run renders with "
        "chatml (--renderer-name llama3 renders as it trained)"
    ]


def test_resuming_with_no_renderer_given_adopts_the_checkpoints(tmp_path: Path, caplog) -> None:
    fake, log_dir = FakeBackend(), tmp_path / "run"
    first = _values(tmp_path, renderer_name="llama3")
    run("sl_basic", first, backend=fake, log_dir=log_dir, max_steps=2)
    with caplog.at_level(logging.INFO, logger="kitchen"):
        resumed = run("sl_basic", _values(tmp_path), backend=fake, log_dir=log_dir, max_steps=3,
                      if_exists="resume")  # fmt: skip
    assert resumed.steps == 3
    records = load_checkpoint_records(log_dir)
    assert records[-1].get("step") == 3  # the resumed run's saves name llama3 too
    assert {r.get("renderer_name") for r in records} == {"llama3"}
    rendered = [r.getMessage() for r in caplog.records if "renderer" in r.getMessage()]
    assert any(line.endswith("(renderer llama3)") for line in rendered), rendered


def test_loading_with_no_renderer_given_adopts_the_checkpoints(
    tmp_path: Path, caplog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The adopted renderer is the one the datums are rendered with: llama3's header tokens."""
    state = _earlier_llama3_state(tmp_path)
    fake = FakeBackend()
    fake.states[str(state)] = 0
    values = _values(tmp_path, load_checkpoint_path=str(state))
    seen: list[str] = []
    forward_backward = FakeTrainingClient.forward_backward

    def recording(self: FakeTrainingClient, data, loss_fn, loss_fn_config=None):  # type: ignore[no-untyped-def]
        seen.extend(fake.tokenizer.decode(d.model_input.to_ints()) for d in data)
        return forward_backward(self, data, loss_fn, loss_fn_config)

    monkeypatch.setattr(FakeTrainingClient, "forward_backward", recording)
    with caplog.at_level(logging.INFO, logger="kitchen"):
        run("sl_basic", values, backend=fake, log_dir=tmp_path / "run", max_steps=1)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert f"rendering with llama3, as the run that saved {state} did" in caplog.messages
    assert seen and all("<|start_header_id|>" in text for text in seen)
    records = load_checkpoint_records(tmp_path / "run")
    assert records and {r.get("renderer_name") for r in records} == {"llama3"}
