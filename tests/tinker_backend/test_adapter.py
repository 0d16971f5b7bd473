"""`--backend tinker` through the official SDK: the key checks, fast failures, the ports, and a
recipe whose `tinker://` checkpoints are recorded and resumed from."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import tinker

from kitchen.engine.errors import BackendError, ConfigError
from kitchen.ports import BackendSettings, SamplingClient, TrainingBackend, TrainingClient
from kitchen.serve.settings import ServeSettings

from .conftest import TEST_KEY, TINY, free_port, sft_datum


def _backend(url: str) -> Any:
    from kitchen.adapters.tinker import create_tinker_backend

    return create_tinker_backend(BackendSettings(base_url=url))


@pytest.mark.parametrize(
    ("key", "problem"),
    [
        (None, "needs an API key"),
        ("tml-abc def", "whitespace"),
        ("tml-secret\n", "whitespace"),
        ("sk-abcdef123456", "starts with 'tml-'"),
    ],
)
def test_missing_or_malformed_key_is_a_config_error_that_never_shows_the_key(
    monkeypatch: pytest.MonkeyPatch, key: str | None, problem: str
) -> None:
    if key is None:
        monkeypatch.delenv("TINKER_API_KEY", raising=False)
    else:
        monkeypatch.setenv("TINKER_API_KEY", key)
    with pytest.raises(ConfigError) as info:
        _backend("http://127.0.0.1:9")
    assert problem in str(info.value) and "TINKER_API_KEY" in str(info.value)
    if key:
        assert key.strip() not in str(info.value)


def test_unreachable_service_fails_in_seconds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TINKER_API_KEY", TEST_KEY)
    url = f"http://127.0.0.1:{free_port()}"
    start = time.monotonic()
    with pytest.raises(BackendError, match="cannot reach the service"):
        _backend(url)
    assert time.monotonic() - start < 2.0


def test_adapter_meets_the_ports_and_reports_failures_as_backend_errors(sdk_env: str) -> None:
    backend = _backend(sdk_env)
    try:
        assert isinstance(backend, TrainingBackend)
        client = backend.create_lora_training_client(TINY, rank=4, seed=1)
        assert isinstance(client, TrainingClient)
        tokens = client.get_tokenizer().encode("a kitchen test sentence", add_special_tokens=False)
        batch = [sft_datum(tokens)]

        async def pipelined() -> float:  # kitchen futures are awaitable and .result()-able
            fb = client.forward_backward(batch, "cross_entropy")
            optim = client.optim_step(tinker.types.AdamParams(learning_rate=1e-2))
            await optim
            return float((await fb).metrics["loss:sum"])

        import asyncio

        assert asyncio.run(pipelined()) > 0
        # A custom loss runs here, on the server's logprobs; its gradient goes back as weights.
        plain = client.forward(batch, "cross_entropy").result().metrics["loss:sum"]
        custom = client.forward_backward_custom(
            batch, lambda data, logprobs: (-sum(lp.sum() for lp in logprobs), {})
        ).result()
        assert custom.metrics["loss:sum"] == pytest.approx(plain, rel=1e-4)
        client.optim_step(tinker.types.AdamParams(learning_rate=1e-2)).result()
        saved = client.save_state("adapter").result().path
        assert saved.startswith("tinker://")
        assert client.load_state_with_optimizer(saved).result().path == saved
        sampler = client.save_weights_and_get_sampling_client()
        assert isinstance(sampler, SamplingClient)
        assert sampler.get_tokenizer().encode("a kitchen", add_special_tokens=False) == tokens[:2]
        reference = client.create_reference_sampling_client()
        assert len(
            reference.compute_logprobs(tinker.types.ModelInput.from_ints(tokens)).result()
        ) == len(tokens)
        with pytest.raises(
            BackendError, match=r"tinker forward_backward: user error: .*target_tokens"
        ):
            bad = tinker.types.Datum(model_input=batch[0].model_input, loss_fn_inputs={})
            client.forward_backward([bad], "cross_entropy").result()
        with pytest.raises(BackendError, match="does not exist on this server"):
            backend.create_training_client_from_state_with_optimizer(
                "tinker://nope/weights/missing"
            )
    finally:
        backend.close()


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_recipe_records_tinker_checkpoints_and_resumes_through_them(
    sdk_env: str, tmp_path: Path
) -> None:
    from kitchen.app.launch import run

    overrides = {
        "model_name": TINY,
        "base_url": sdk_env,
        "batch_size": 2,
        "save_every": 1,
        "eval_every": 0,
    }
    first = run("sl_loop", overrides, backend="tinker", log_dir=tmp_path, max_steps=2)
    assert first.steps == 2
    records = _read_jsonl(tmp_path / "checkpoints.jsonl")
    assert records and all(
        r["state_path"].startswith("tinker://") for r in records if r.get("state_path")
    )
    resumed = run(
        "sl_loop", overrides, backend="tinker", log_dir=tmp_path, if_exists="resume", max_steps=3
    )
    assert resumed.steps == 3
    steps = [m["step"] for m in _read_jsonl(tmp_path / "metrics.jsonl") if "step" in m]
    assert steps[:3] == [0, 1, 2]  # resumed at step 2: nothing replayed, nothing skipped


# -- a server that requires a key (no engine needed: refusals happen before any model work) ------


@pytest.fixture
def keyed_server() -> Iterator[str]:
    from kitchen.adapters.fake import create_fake_backend
    from kitchen.serve import serving

    settings = ServeSettings(port=0, require_key=True, api_key="tml-the-right-key")
    with serving(settings, backend=create_fake_backend(BackendSettings())) as url:
        yield url


def test_require_key_refuses_requests_without_the_key(
    keyed_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert httpx.get(f"{keyed_server}/api/v1/healthz").status_code == 401  # every route
    keyed = {"X-API-Key": "tml-the-right-key"}
    assert httpx.get(f"{keyed_server}/api/v1/healthz", headers=keyed).status_code == 200
    missing = httpx.post(f"{keyed_server}/api/v1/client/config", json={"sdk_version": "0.38.0"})
    wrong = httpx.post(
        f"{keyed_server}/api/v1/client/config",
        json={"sdk_version": "0.38.0"},
        headers={"X-API-Key": "tml-wrong"},
    )
    assert missing.status_code == 401 and "missing" in missing.json()["detail"]
    assert wrong.status_code == 401 and "tml-wrong" not in wrong.text

    monkeypatch.setenv("TINKER_API_KEY", "tml-wrong-key-value")
    start = time.monotonic()
    with pytest.raises(BackendError, match="refused the API key") as info:
        _backend(keyed_server).create_lora_training_client(TINY, rank=4)
    assert time.monotonic() - start < 2.0
    assert "tml-wrong-key-value" not in str(info.value)

    session = tinker.ServiceClient(base_url=keyed_server, api_key="tml-the-right-key")
    try:
        assert session.holder.get_session_id().startswith("kitchen-")
    finally:
        session.close("success").result()
