"""Training on a tiny model: loss falls, gradients accumulate until optim_step, custom losses,
pipelined futures, full fine-tuning, and reference logprobs that LoRA training leaves alone."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from tinker import types

from kitchen.adapters.local.model.lora import adapter_parameters
from kitchen.ports import GRAD_NORM_METRIC

from .conftest import TEXTS, TINY, sft_datum

ADAM = types.AdamParams(learning_rate=1e-2)


def lora_weights(client: Any) -> dict[str, torch.Tensor]:
    return {
        k: p.detach().clone()
        for k, p in adapter_parameters(client.host.model, client.adapter).items()
    }


def same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return all(torch.equal(a[k], b[k]) for k in a)


def test_cross_entropy_loss_falls_over_20_steps(backend: Any) -> None:
    client = backend.create_lora_training_client(TINY, rank=8)
    batch = [sft_datum(client.get_tokenizer(), t) for t in TEXTS]
    losses = []
    for _ in range(20):
        fb = client.forward_backward(batch, "cross_entropy")
        client.optim_step(types.AdamParams(learning_rate=5e-3))
        losses.append(fb.result().metrics["loss:sum"])
    assert losses[-1] < 0.5 * losses[0]
    assert all(np.isfinite(losses))


def test_params_change_after_optim_step_and_not_before(backend: Any) -> None:
    client = backend.create_lora_training_client(TINY, rank=4, seed=7)
    batch = [sft_datum(client.get_tokenizer(), TEXTS[0])]
    before = lora_weights(client)
    client.forward_backward(batch, "cross_entropy").result()
    assert same(before, lora_weights(client))
    response = client.optim_step(ADAM).result()
    after = lora_weights(client)
    assert not same(before, after)
    assert response.metrics is not None and response.metrics[GRAD_NORM_METRIC] > 0


def test_forward_computes_loss_without_gradients(backend: Any) -> None:
    client = backend.create_lora_training_client(TINY, rank=4)
    batch = [sft_datum(client.get_tokenizer(), t) for t in TEXTS]
    forward = client.forward(batch, "cross_entropy").result()
    fb = client.forward_backward(batch, "cross_entropy").result()
    assert forward.metrics["loss:sum"] == pytest.approx(fb.metrics["loss:sum"], rel=1e-6)
    # Sum of -weights * logprobs over every datum, as Tinker reduces cross_entropy.
    total = -sum(float(out["logprobs"].to_numpy().sum()) for out in forward.loss_fn_outputs)
    assert total == pytest.approx(forward.metrics["loss:sum"], rel=1e-5)
    assert [out["logprobs"].shape for out in forward.loss_fn_outputs] == [
        list(d.loss_fn_inputs["target_tokens"].to_numpy().shape) for d in batch
    ]


def test_gradients_accumulate_until_optim_step(backend: Any) -> None:
    twice = backend.create_lora_training_client(TINY, rank=4, seed=3)
    doubled = backend.create_lora_training_client(TINY, rank=4, seed=3)
    batch = [sft_datum(twice.get_tokenizer(), TEXTS[1])]
    twice.forward_backward(batch, "cross_entropy")
    twice.forward_backward(batch, "cross_entropy")
    a = twice.optim_step(ADAM).result().metrics
    b = doubled.forward_backward(batch * 2, "cross_entropy")
    b = doubled.optim_step(ADAM).result().metrics
    assert a[GRAD_NORM_METRIC] == pytest.approx(b[GRAD_NORM_METRIC], rel=1e-5)
    x, y = lora_weights(twice), lora_weights(doubled)
    assert all(torch.allclose(x[k], y[k], atol=1e-6) for k in x)


def test_pipelined_submissions_equal_a_step_by_step_run(backend: Any) -> None:
    pipelined = backend.create_lora_training_client(TINY, rank=8, seed=11)
    stepwise = backend.create_lora_training_client(TINY, rank=8, seed=11)
    batch = [sft_datum(pipelined.get_tokenizer(), t) for t in TEXTS]
    futures = []
    for _ in range(4):  # submit everything before awaiting anything
        futures.append(pipelined.forward_backward(batch, "cross_entropy"))
        pipelined.optim_step(ADAM)
    expected = []
    for _ in range(4):
        expected.append(
            stepwise.forward_backward(batch, "cross_entropy").result().metrics["loss:sum"]
        )
        stepwise.optim_step(ADAM).result()
    assert [f.result().metrics["loss:sum"] for f in futures] == expected
    assert expected[-1] < expected[0]


def test_custom_loss_matches_builtin_cross_entropy(backend: Any) -> None:
    builtin = backend.create_lora_training_client(TINY, rank=4, seed=5)
    custom = backend.create_lora_training_client(TINY, rank=4, seed=5)
    batch = [sft_datum(builtin.get_tokenizer(), t) for t in TEXTS]

    def weighted_nll(
        data: list[types.Datum], logprobs: list[torch.Tensor]
    ) -> tuple[torch.Tensor, dict[str, float]]:
        loss = sum(
            -(lp * d.loss_fn_inputs["weights"].to_torch()).sum()
            for d, lp in zip(data, logprobs, strict=True)
        )
        return loss, {"n_data": float(len(data))}

    want = builtin.forward_backward(batch, "cross_entropy").result()
    got = custom.forward_backward_custom(batch, weighted_nll).result()
    assert got.metrics["loss:sum"] == pytest.approx(want.metrics["loss:sum"], rel=1e-5)
    assert got.metrics["n_data"] == 3.0
    norm_builtin = builtin.optim_step(ADAM).result().metrics[GRAD_NORM_METRIC]
    norm_custom = custom.optim_step(ADAM).result().metrics[GRAD_NORM_METRIC]
    assert norm_custom == pytest.approx(norm_builtin, rel=1e-4)


def test_lora_training_leaves_reference_logprobs_unchanged(backend: Any) -> None:
    client = backend.create_lora_training_client(TINY, rank=8)
    reference = client.create_reference_sampling_client()
    datum = sft_datum(client.get_tokenizer(), TEXTS[0])
    prompt = types.ModelInput.from_ints(datum.model_input.to_ints())
    base_before = reference.compute_logprobs(prompt).result()
    for _ in range(3):
        client.forward_backward([datum], "cross_entropy")
        client.optim_step(ADAM)
    trained = client.save_weights_and_get_sampling_client().compute_logprobs(prompt).result()
    base_after = reference.compute_logprobs(prompt).result()
    assert base_after == base_before
    assert trained != base_before
    assert reference.host.base is client.host.base  # one base model in memory


def test_full_fine_tuning_with_rank_zero(backend: Any) -> None:
    client = backend.create_lora_training_client(TINY, rank=0)
    assert client.adapter is None and client.get_info().is_lora is False
    shared = backend.shared_host(TINY)
    assert client.host is not shared  # a private copy: the shared base never changes
    batch = [sft_datum(client.get_tokenizer(), t) for t in TEXTS]
    first = client.forward_backward(batch, "cross_entropy").result().metrics["loss:sum"]
    client.optim_step(types.AdamParams(learning_rate=1e-3)).result()
    second = client.forward(batch, "cross_entropy").result().metrics["loss:sum"]
    assert second < first
    embed = client.host.base.get_input_embeddings().weight
    assert not torch.equal(embed, shared.base.get_input_embeddings().weight)


def test_bad_datum_fails_with_position_and_key(backend: Any) -> None:
    client = backend.create_lora_training_client(TINY, rank=4)
    datum = types.Datum(
        model_input=types.ModelInput.from_ints([1, 2, 3]),
        loss_fn_inputs={
            "target_tokens": np.array([2, 3, 4]),
            "weights": np.ones(2, dtype=np.float32),
        },
    )
    from kitchen.engine.errors import BackendError

    with pytest.raises(
        BackendError, match=r"datum 0: loss_fn_inputs\['weights'\] has shape \[2\]; expected \[3\]"
    ):
        client.forward_backward([datum], "cross_entropy").result()
    with pytest.raises(BackendError, match="datum 0: loss_fn_inputs has no 'logprobs'"):
        client.forward_backward([datum], "ppo").result()
    with pytest.raises(BackendError, match="stable_reinforce needs provenance"):
        client.forward_backward([datum], "stable_reinforce").result()
    with pytest.raises(BackendError, match="not supported by the local engine"):
        client.forward_backward([datum], "no_such_loss").result()  # type: ignore[arg-type]
    outside = types.Datum(
        model_input=types.ModelInput.from_ints([1, 2, 10**6]),
        loss_fn_inputs={"target_tokens": np.array([2, 3, 4]), "weights": np.ones(3, np.float32)},
    )
    with pytest.raises(BackendError, match="datum 0: model_input: token id 1000000 is outside"):
        client.forward_backward([outside], "cross_entropy").result()


def test_optim_step_reports_peak_accelerator_memory_since_the_previous_one(
    backend: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kitchen.adapters.local.clients import training_client

    client = backend.create_lora_training_client(TINY, rank=4)
    client.forward_backward([sft_datum(client.get_tokenizer(), TEXTS[0])], "cross_entropy")
    metrics = client.optim_step(ADAM).result().metrics or {}
    on_accelerator = client.host.device.type == "cuda"
    assert ("memory/peak_gib" in metrics) == on_accelerator  # a CPU keeps no such count
    if on_accelerator:
        assert 0 < metrics["memory/peak_gib"] < 1  # the tiny model
    # The accounting, with torch.cuda's allocator counters stood in for.
    peaks, resets = [5 * 2**30, 2**29], []
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda device: peaks.pop(0))
    monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", resets.append)
    cuda = torch.device("cuda", 1)
    assert training_client.peak_memory(cuda) == {"memory/peak_gib": 5.0}
    assert training_client.peak_memory(cuda) == {"memory/peak_gib": 0.5}
    assert resets == [cuda, cuda]  # each call starts the next interval
    assert training_client.peak_memory(torch.device("cpu")) == {}
