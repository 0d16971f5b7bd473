"""Contract tests: the official, unmodified Tinker SDK drives `kitchen serve`.

They fail loudly when the installed SDK is not the version the server speaks (0.38.0)."""

from __future__ import annotations

import time
from importlib.metadata import version
from typing import Any

import httpx
import numpy as np
import pytest
import tinker
from tinker import types

from .conftest import TEXTS, TINY, sft_datum

PINNED_SDK = "0.38.0"
ADAM = types.AdamParams(learning_rate=1e-2)


def test_installed_tinker_sdk_is_the_pinned_version() -> None:
    installed = version("tinker")
    assert installed == PINNED_SDK, (
        f"tinker SDK {installed} is installed; kitchen serve and the tinker adapter speak the "
        f"{PINNED_SDK} wire protocol. Re-check kitchen/serve against the new SDK "
        "(routes, protobuf messages, retrieve_future) before changing the pin in pyproject.toml."
    )
    assert tinker.__version__ == PINNED_SDK
    # Private SDK pieces the adapter and the server rely on.
    from tinker.lib.public_interfaces.training_client import TrainingClient
    from tinker.proto import tinker_public_pb2 as pb

    assert hasattr(TrainingClient, "_load_state_impl")
    assert {"ForwardBackwardRequest", "ForwardBackwardOutput", "SampleResponse"} <= set(dir(pb))


@pytest.fixture
def service(sdk_env: str) -> Any:
    client = tinker.ServiceClient()
    yield client
    client.close("success").result()


def _tokens(training_client: Any) -> list[list[int]]:
    tokenizer = training_client.get_tokenizer()
    return [tokenizer.encode(t, add_special_tokens=False) for t in TEXTS]


def _step(client: Any, batch: list[types.Datum]) -> float:
    fb = client.forward_backward(batch, "cross_entropy")
    client.optim_step(ADAM).result()
    return float(fb.result().metrics["loss:sum"])


def _loss(client: Any, batch: list[types.Datum]) -> float:
    return float(client.forward(batch, "cross_entropy").result().metrics["loss:sum"])


def test_train_save_restore_sample_and_close(service: Any, sdk_env: str) -> None:
    client = service.create_lora_training_client(TINY, rank=8, seed=3).result()
    info = client.get_info()
    assert info.model_data.model_name == TINY and info.is_lora and info.lora_rank == 8
    tokens = _tokens(client)
    batch = [sft_datum(t) for t in tokens]
    losses = [_step(client, batch) for _ in range(3)]
    assert losses[-1] < losses[0]

    state = client.save_state("step3").result()
    assert state.path.startswith("tinker://") and state.path.endswith("/weights/step3")
    sampler_path = client.save_weights_for_sampler("step3").result().path
    assert sampler_path.startswith("tinker://") and "/sampler_weights/" in sampler_path
    sampler = client.save_weights_and_get_sampling_client().result()  # also as of step 3

    # Restored with its optimizer, the copy continues exactly as the original does.
    restored = service.create_training_client_from_state_with_optimizer(state.path).result()
    assert restored.model_id != client.model_id
    assert _loss(restored, batch) == pytest.approx(_loss(client, batch), rel=1e-6)
    assert _step(restored, batch) == pytest.approx(_step(client, batch), rel=1e-6)
    assert _loss(restored, batch) == pytest.approx(_loss(client, batch), rel=1e-5)
    # Weights only: a fresh Adam state takes a different first step.
    fresh = service.create_training_client_from_state(state.path).result()
    _step(fresh, batch)
    assert _loss(fresh, batch) != pytest.approx(_loss(client, batch), rel=1e-5)

    prompt = types.ModelInput.from_ints(tokens[0][:6])
    params = types.SamplingParams(max_tokens=5, temperature=1.0, seed=11)
    response = sampler.sample(prompt, 3, params, include_prompt_logprobs=True).result()
    assert len(response.sequences) == 3
    assert len({s.sequence_id for s in response.sequences}) == 3
    for seq in response.sequences:
        assert 1 <= len(seq.tokens) <= 5 and len(seq.logprobs or []) == len(seq.tokens)
        assert seq.stop_reason in ("stop", "length")
    logprobs = sampler.compute_logprobs(prompt).result()
    assert len(logprobs) == prompt.length and logprobs[0] is None
    assert all(lp is not None and lp < 0 for lp in logprobs[1:])
    assert response.prompt_logprobs is not None and response.prompt_logprobs[0] is None
    assert response.prompt_logprobs[1:] == pytest.approx(logprobs[1:], rel=1e-5)
    # The same weights saved to a path sample the same logprobs.
    for path in (sampler_path, state.path):
        from_path = service.create_sampling_client(model_path=path).result()
        assert from_path.get_base_model() == TINY
        assert from_path.compute_logprobs(prompt).result()[1:] == pytest.approx(
            logprobs[1:], rel=1e-5
        )
    info = tinker.RestClient().get_weights_info_by_tinker_path(state.path).result()
    assert info.base_model == TINY and info.is_lora and info.lora_rank == 8

    service.close("success").result()
    response = httpx.post(
        f"{sdk_env}/api/v1/get_info",
        json={"model_id": client.model_id},
        headers={"X-API-Key": "tml-x"},
    )
    assert response.status_code == 404  # finishing the session freed its models


def test_seeds_past_32_bits_give_their_own_tokens(service: Any) -> None:
    """A client's seed reaches the generator whole: 0 and 2**40 sample different tokens."""
    sampler = service.create_sampling_client(base_model=TINY).result()
    prompt = types.ModelInput.from_ints([5, 17, 42, 99, 7])

    def tokens(seed: int) -> list[list[int]]:
        params = types.SamplingParams(max_tokens=16, temperature=1.0, seed=seed, stop=[])
        return [s.tokens for s in sampler.sample(prompt, 2, params).result().sequences]

    assert tokens(0) != tokens(2**40)
    assert tokens(2**40) == tokens(2**40)
    assert tokens(2**40 + 1) != tokens(2**40)
    with pytest.raises(tinker.RequestFailedError, match=r"seed is 18446744073709551616; expected"):
        tokens(2**64)


def test_pipelined_requests_run_in_submission_order(service: Any) -> None:
    sequential = service.create_lora_training_client(TINY, rank=4, seed=5).result()
    pipelined = service.create_lora_training_client(TINY, rank=4, seed=5).result()
    batches = [[sft_datum(t)] for t in _tokens(sequential)] * 2
    expected = [_step(sequential, b) for b in batches]
    futures = [
        (pipelined.forward_backward(b, "cross_entropy"), pipelined.optim_step(ADAM))
        for b in batches
    ]
    got = [float(fb.result().metrics["loss:sum"]) for fb, _ in futures]
    assert got == pytest.approx(expected, rel=1e-6)


def _fails_fast(call: Any, error: type[BaseException] | tuple[type[BaseException], ...]) -> str:
    start = time.monotonic()
    with pytest.raises(error) as info:
        call()
    assert time.monotonic() - start < 2.0, f"{call} took {time.monotonic() - start:.1f} s to fail"
    return str(info.value)


def test_bad_requests_fail_fast_as_user_errors(service: Any) -> None:
    client = service.create_lora_training_client(TINY, rank=4).result()
    tokens = _tokens(client)[0]
    no_targets = types.Datum(
        model_input=types.ModelInput.from_ints(tokens[:-1]),
        loss_fn_inputs={"weights": np.ones(len(tokens) - 1, dtype=np.float32)},
    )
    message = _fails_fast(
        lambda: client.forward_backward([no_targets], "cross_entropy").result(),
        tinker.RequestFailedError,
    )
    assert "target_tokens" in message
    _fails_fast(
        lambda: client.forward_backward([sft_datum(tokens)], "no_such_loss").result(),  # type: ignore[arg-type]
        tinker.RequestFailedError,
    )
    _fails_fast(
        lambda: service.create_training_client_from_state("tinker://nope/weights/x").result(),
        tinker.BadRequestError,
    )
    sampler = client.save_weights_and_get_sampling_client().result()
    _fails_fast(
        lambda: sampler.sample(
            types.ModelInput.from_ints(tokens[:3]),
            1,
            types.SamplingParams(max_tokens=2),
            target_prompt_logprobs=types.TensorData.from_numpy(np.zeros((5, 1), dtype=np.int64)),
        ).result(),
        tinker.BadRequestError,
    )
    client.save_state("twice").result()
    _fails_fast(lambda: client.save_state("twice").result(), tinker.RequestFailedError)
    # The client keeps working after its bad requests: none of them stalled its request order.
    start = time.monotonic()
    assert _step(client, [sft_datum(tokens)]) > 0
    assert time.monotonic() - start < 5.0


def test_malformed_http_requests_get_4xx_not_5xx(sdk_env: str) -> None:
    headers = {"X-API-Key": "tml-x"}
    with httpx.Client(base_url=sdk_env, headers=headers, timeout=5) as http:
        garbage = http.post(
            "/api/v1/forward_backward",
            content=b"\xff\x00garbage",
            headers={"Content-Type": "application/x-protobuf"},
        )
        unknown = http.post("/api/v1/retrieve_future", json={"request_id": "req-missing"})
        invalid = http.post("/api/v1/create_model", json={"base_model": TINY})
        session = http.post("/api/v1/session_heartbeat", json={"session_id": "no-such-session"})
    assert garbage.status_code == 400 and "ForwardBackwardRequest" in garbage.json()["detail"]
    assert unknown.status_code == 404
    assert invalid.status_code == 400 and "session_id" in invalid.json()["detail"]
    assert session.status_code == 404
    for response in (garbage, unknown, invalid, session):
        assert response.headers["x-should-retry"] == "false"


def test_sessions_heartbeat_until_finished(sdk_env: str) -> None:
    with httpx.Client(base_url=sdk_env, headers={"X-API-Key": "tml-x"}, timeout=5) as http:
        created = http.post(
            "/api/v1/create_session",
            json={"tags": [], "user_metadata": None, "sdk_version": "0.38.0"},
        )
        session_id = created.json()["session_id"]
        beat = http.post("/api/v1/session_heartbeat", json={"session_id": session_id})
        finished = http.post(
            f"/api/v1/sessions/{session_id}/finish", json={"reason": {"type": "success"}}
        )
        after = http.post("/api/v1/session_heartbeat", json={"session_id": session_id})
    assert beat.status_code == 200 and beat.json()["type"] == "session_heartbeat"
    assert finished.status_code == 200
    assert after.status_code == 410  # the SDK stops its heartbeat loop on 410
