"""Work of clients that die, cancel or go away is dropped: a dead session's queued sampling stops
delaying everyone else, cancel_future cancels, and shutdown takes seconds, not the backlog."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tinker import types

from kitchen.serve.service import KitchenService
from kitchen.serve.settings import ServeSettings

from .conftest import TINY

PROMPT = types.ModelInput.from_ints([5, 17, 42, 99, 7])


@pytest.fixture
def service(tmp_path: Path) -> Iterator[KitchenService]:
    settings = ServeSettings(checkpoint_dir=tmp_path, session_timeout_s=0.2, dtype="float32")
    service = KitchenService(settings)
    service.preload(TINY)
    yield service
    service.close()


def _sampler(service: KitchenService) -> str:
    session = service.create_session(
        types.CreateSessionRequest(tags=[], user_metadata=None, sdk_version="0.38.0")
    ).session_id
    return service.create_sampling_session(
        types.CreateSamplingSessionRequest(
            session_id=session, sampling_session_seq_id=0, base_model=TINY
        )
    ).sampling_session_id


def _sample(service: KitchenService, sampler: str, max_tokens: int) -> str:
    params = types.SamplingParams(max_tokens=max_tokens, stop=[], seed=1)
    request = types.SampleRequest(
        sampling_session_id=sampler, prompt=PROMPT, num_samples=4, sampling_params=params
    )
    return service.asample(request).request_id


def _result(service: KitchenService, request_id: str, timeout: float) -> object:
    record = service.requests.get(request_id)
    assert record is not None
    return record.future.result(timeout=timeout)


def test_a_dead_clients_queued_samples_are_dropped_and_a_probe_is_quick(
    service: KitchenService,
) -> None:
    dead = _sampler(service)
    backlog = [_sample(service, dead, max_tokens=2000) for _ in range(16)]
    time.sleep(0.3)  # no heartbeat since: the reaper finishes the session
    assert service.reap_idle_sessions()
    start = time.monotonic()
    probe = _sample(service, _sampler(service), max_tokens=1)
    _result(service, probe, timeout=30)
    assert time.monotonic() - start < 2.0
    for request_id in backlog:
        record = service.requests.get(request_id)
        assert record is not None and record.future.done()
        with pytest.raises(Exception, match="stopped heartbeating"):
            record.future.result()


def test_cancel_future_cancels_the_work(service: KitchenService) -> None:
    sampler = _sampler(service)
    request_id = _sample(service, sampler, max_tokens=2000)
    service.cancel_request(request_id)
    with pytest.raises(Exception, match="cancelled by the client"):
        _result(service, request_id, timeout=5)
    start = time.monotonic()
    _result(service, _sample(service, sampler, max_tokens=1), timeout=30)
    assert time.monotonic() - start < 2.0


def test_shutdown_cancels_the_backlog_within_seconds(tmp_path: Path) -> None:
    service = KitchenService(ServeSettings(checkpoint_dir=tmp_path, dtype="float32"))
    service.preload(TINY)
    sampler = _sampler(service)
    backlog = [_sample(service, sampler, max_tokens=2000) for _ in range(16)]
    start = time.monotonic()
    service.close()
    assert time.monotonic() - start < 5.0
    assert all(service.requests.get(r).future.done() for r in backlog)  # type: ignore[union-attr]


def serve_cli(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *flags: str
) -> tuple[Any, list[ServeSettings]]:
    """`kitchen serve --checkpoint-dir tmp_path FLAGS` up to serving: its result and the settings
    it would have served with."""
    from typer.testing import CliRunner

    import kitchen.serve
    from kitchen.app.cli import app

    seen: list[ServeSettings] = []
    monkeypatch.setattr(kitchen.serve, "serve", seen.append)
    result = CliRunner().invoke(app, ["serve", "--checkpoint-dir", str(tmp_path), *flags])
    return result, seen


def test_kitchen_serve_takes_the_session_timeout_from_its_flag(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    result, seen = serve_cli(tmp_path, monkeypatch, "--session-timeout", "300")
    assert result.exit_code == 0, result.output
    assert seen[0].session_timeout_s == 300.0
    assert ServeSettings(checkpoint_dir=tmp_path).session_timeout_s == 30.0


def test_kitchen_serve_says_its_compute_dtype_before_serving(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import asyncio

    import uvicorn

    import kitchen.serve

    sent: list[str] = []

    def start_and_stop(app: Any, **options: Any) -> None:  # the app's own startup and shutdown
        async def lifespan() -> None:
            events: asyncio.Queue[dict[str, str]] = asyncio.Queue()
            events.put_nowait({"type": "lifespan.startup"})
            events.put_nowait({"type": "lifespan.shutdown"})

            async def send(message: dict[str, Any]) -> None:
                sent.append(message["type"])

            await app(
                {"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}}, events.get, send
            )

        asyncio.run(lifespan())

    monkeypatch.setattr(uvicorn, "run", start_and_stop)
    kitchen.serve.serve(ServeSettings(checkpoint_dir=tmp_path, preload=[TINY], dtype="float32"))
    assert "kitchen serve: compute dtype float32 (--dtype float32)" in capsys.readouterr().err
    assert sent == ["lifespan.startup.complete", "lifespan.shutdown.complete"]


def test_kitchen_serve_gives_vllm_its_share_of_the_gpu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    share = ("--sampler", "vllm", "--vllm-gpu-memory-utilization")
    result, seen = serve_cli(tmp_path, monkeypatch, *share, "0.4")
    assert result.exit_code == 0, result.output
    assert seen[0].vllm_gpu_memory_utilization == 0.4
    refused, seen = serve_cli(tmp_path, monkeypatch, *share, "0")
    assert refused.exit_code == 2 and not seen
    assert "--vllm-gpu-memory-utilization 0.0: expected a share in (0, 1]" in refused.output
