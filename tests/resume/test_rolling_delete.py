"""Retired rolling checkpoints are deleted by the backend that saved them where it can delete
(kitchen.ports.CheckpointDeleter: the fake's in-memory states, Tinker's `tinker://` paths through
the SDK's RestClient), and from this disk otherwise; a deletion that fails is one warning and the
run goes on."""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import logging
from pathlib import Path
from types import SimpleNamespace
from typing import Any, ClassVar

import pytest

from kitchen.adapters.fake import FakeBackend
from kitchen.app.launch import run
from kitchen.engine.errors import BackendError
from kitchen.engine.stage import Context
from kitchen.ports import BackendSettings, CheckpointDeleter
from kitchen.workflows.common.checkpoint import SaveCheckpoint
from tests.helpers import chat_files
from train_core.checkpoint import live_checkpoint_records, load_checkpoint_records


def test_the_fake_deletes_the_retired_states_and_keeps_the_live_ones(tmp_path: Path) -> None:
    train, _ = chat_files(tmp_path)
    values = {"dataset": train, "batch_size": 4, "save_every": 0, "no_register": True,
              "rolling_save_every": 1, "rolling_keep": 2}  # fmt: skip
    fake = FakeBackend()
    log_dir = tmp_path / "run"
    run("sl_basic", values, backend=fake, log_dir=log_dir, max_steps=4)
    rolling = [r.state_path for r in load_checkpoint_records(log_dir) if r.get("rolling")]
    assert rolling == [f"fake://state/{n:06d}" for n in (1, 2, 3, 4)]
    # each step retired the one before the newest 2; the final retired the rest
    assert fake.calls.count("delete_checkpoint") == 4
    assert not set(rolling) & set(fake.states) and "fake://state/final" in fake.states
    assert {r.state_path for r in live_checkpoint_records(log_dir)} == {"fake://state/final"}
    with pytest.raises(BackendError, match="no checkpoint at 'fake://state/000001'"):
        fake.create_training_client_from_state(rolling[0])


class _SdkFuture:
    """What the SDK's calls return: an object whose `.future()` is a concurrent future."""

    def __init__(self, error: Exception | None = None) -> None:
        self._future: concurrent.futures.Future[None] = concurrent.futures.Future()
        if error is None:
            self._future.set_result(None)
        else:
            self._future.set_exception(error)

    def future(self) -> concurrent.futures.Future[None]:
        return self._future


class _RestClient:
    """The SDK's RestClient, recording its construction and the paths it is asked to delete."""

    made: ClassVar[list[dict[str, Any]]] = []
    deleted: ClassVar[list[str]] = []
    refuse: ClassVar[set[str]] = set()

    def __init__(self, *, base_url: str | None = None, api_key: str | None = None) -> None:
        self.made.append({"base_url": base_url, "api_key": api_key})

    def delete_checkpoint_from_tinker_path(self, tinker_path: str) -> _SdkFuture:
        self.deleted.append(tinker_path)
        if tinker_path in self.refuse:
            return _SdkFuture(RuntimeError(f"checkpoint {tinker_path} not found"))
        return _SdkFuture()


@pytest.fixture
def tinker_backend(monkeypatch: pytest.MonkeyPatch) -> Any:
    import tinker

    from kitchen.adapters.tinker.backend import TinkerBackend
    from tests.tinker_backend.conftest import TEST_KEY

    monkeypatch.setenv("TINKER_API_KEY", TEST_KEY)
    monkeypatch.setattr(_RestClient, "made", [])
    monkeypatch.setattr(_RestClient, "deleted", [])
    monkeypatch.setattr(_RestClient, "refuse", set())
    monkeypatch.setattr(tinker, "RestClient", _RestClient)
    settings = BackendSettings(base_url="http://127.0.0.1:9")
    return TinkerBackend(settings, service_client=object())


def test_the_tinker_adapter_deletes_through_the_sdks_rest_client(tinker_backend: Any) -> None:
    from tests.tinker_backend.conftest import TEST_KEY

    assert isinstance(tinker_backend, CheckpointDeleter)
    assert tinker_backend.delete_checkpoint("tinker://run-1/weights/000001").result() is None
    tinker_backend.delete_checkpoint("tinker://run-1/weights/000002").result()
    assert _RestClient.deleted == ["tinker://run-1/weights/000001", "tinker://run-1/weights/000002"]
    assert _RestClient.made == [{"base_url": "http://127.0.0.1:9", "api_key": TEST_KEY}]  # once
    _RestClient.refuse.add("tinker://run-1/weights/000003")
    with pytest.raises(BackendError) as e:
        tinker_backend.delete_checkpoint("tinker://run-1/weights/000003").result()
    assert str(e.value) == (
        "tinker delete_checkpoint(tinker://run-1/weights/000003): RuntimeError: checkpoint "
        "tinker://run-1/weights/000003 not found"
    )


class _TinkerPaths:
    """A training client whose save_state answers `tinker://` paths, as the service's does."""

    async def _path(self, name: str) -> Any:
        return type("Saved", (), {"path": f"tinker://run-1/weights/{name}"})()

    def save_state(self, name: str) -> Any:
        return self._path(name)


def test_a_rolling_save_on_tinker_deletes_the_retired_one_and_warns_if_it_cannot(
    tinker_backend: Any, tmp_path: Path, caplog
) -> None:
    state = SimpleNamespace(training_client=_TinkerPaths(), renderer=None, step=0)
    ctx: Context[Any] = Context(state=state, backend=tinker_backend, log_dir=tmp_path)
    save = SaveCheckpoint(keep=1)
    _RestClient.refuse.add("tinker://run-1/weights/000002")
    with caplog.at_level(logging.WARNING, logger="kitchen"):
        for step in range(3):
            state.step = step
            asyncio.run(save(ctx))
    assert _RestClient.deleted == ["tinker://run-1/weights/000001", "tinker://run-1/weights/000002"]
    assert [r.name for r in live_checkpoint_records(tmp_path)] == ["000003"]
    lines = [json.loads(x) for x in (tmp_path / "checkpoints.jsonl").read_text().splitlines()]
    assert [x.get("retired_state_path") for x in lines if "retired_state_path" in x] == [
        "tinker://run-1/weights/000001",
        "tinker://run-1/weights/000002",
    ]
    assert caplog.messages == [
        "rolling checkpoint tinker://run-1/weights/000002 retired but not deleted: tinker "
        "delete_checkpoint(tinker://run-1/weights/000002): RuntimeError: checkpoint "
        "tinker://run-1/weights/000002 not found"
    ]
