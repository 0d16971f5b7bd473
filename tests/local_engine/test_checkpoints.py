"""Checkpoints: exact resume with the optimizer, weights-only loads, and clear refusals."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from tinker import types

from kitchen.engine.errors import BackendError

from .conftest import TEXTS, TINY, sft_datum

ADAM = types.AdamParams(learning_rate=5e-3, weight_decay=0.01, grad_clip_norm=1.0)


def _step(client: Any, batch: list[types.Datum]) -> float:
    loss = client.forward_backward(batch, "cross_entropy").result().metrics["loss:sum"]
    client.optim_step(ADAM).result()
    return loss


@pytest.mark.parametrize("rank", [8, 0])
def test_resume_with_optimizer_reproduces_the_next_steps_exactly(backend: Any, rank: int) -> None:
    original = backend.create_lora_training_client(TINY, rank=rank)
    batch = [sft_datum(original.get_tokenizer(), t) for t in TEXTS]
    for _ in range(3):
        _step(original, batch)
    path = original.save_state("step3").result().path
    assert Path(path) == backend.settings.checkpoint_root / "weights" / "step3"
    expected = [_step(original, batch) for _ in range(2)]
    resumed = backend.create_training_client_from_state_with_optimizer(path)
    assert resumed.step == 3
    assert [_step(resumed, batch) for _ in range(2)] == expected


def test_weights_only_resume_restores_weights_but_not_adam_moments(backend: Any) -> None:
    original = backend.create_lora_training_client(TINY, rank=8)
    batch = [sft_datum(original.get_tokenizer(), t) for t in TEXTS]
    for _ in range(3):
        _step(original, batch)
    path = original.save_state("weights-only").result().path
    resumed = backend.create_training_client_from_state(path)
    assert (
        resumed.forward(batch, "cross_entropy").result().metrics
        == original.forward(batch, "cross_entropy").result().metrics
    )
    assert _step(resumed, batch) == _step(original, batch)  # same weights, same loss...
    assert _step(resumed, batch) != _step(original, batch)  # ...but a fresh Adam steps differently


def test_load_state_into_an_existing_client(backend: Any) -> None:
    trained = backend.create_lora_training_client(TINY, rank=4, seed=1)
    fresh = backend.create_lora_training_client(TINY, rank=4, seed=2)
    batch = [sft_datum(trained.get_tokenizer(), TEXTS[0])]
    _step(trained, batch)
    path = trained.save_state("trained").result().path
    response = fresh.load_state(path).result()
    assert response.path == path
    assert (
        fresh.forward(batch, "cross_entropy").result().metrics
        == trained.forward(batch, "cross_entropy").result().metrics
    )


def test_mismatched_or_foreign_checkpoints_are_refused(backend: Any, tmp_path: Path) -> None:
    rank8 = backend.create_lora_training_client(TINY, rank=8)
    path = rank8.save_state("rank8").result().path
    rank4 = backend.create_lora_training_client(TINY, rank=4)
    with pytest.raises(BackendError, match="was saved with LoRA"):
        rank4.load_state(path).result()
    with pytest.raises(BackendError, match="Tinker service path"):
        rank4.load_state("tinker://run-1/weights/000010").result()
    with pytest.raises(BackendError, match=r"no kitchen_checkpoint\.json"):
        backend.create_training_client_from_state(str(tmp_path))
    sampler_path = rank8.save_weights_for_sampler("rank8").result().path
    with pytest.raises(BackendError, match="holds sampler weights"):
        backend.create_training_client_from_state(sampler_path)
    with pytest.raises(BackendError, match="checkpoint name"):
        rank8.save_state("../escape").result()


def test_checkpoint_paths_accept_the_local_scheme(backend: Any) -> None:
    client = backend.create_lora_training_client(TINY, rank=4)
    path = client.save_weights_for_sampler("scheme").result().path
    sampler = backend.create_sampling_client(model_path=f"local://{path}")
    assert sampler.compute_logprobs(types.ModelInput.from_ints([1, 2, 3])).result()[0] is None


def test_lora_sampler_weights_load_with_peft(backend: Any) -> None:
    """The adapter folder is peft's own format, so other tools can use it."""
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    client = backend.create_lora_training_client(TINY, rank=4)
    batch = [sft_datum(client.get_tokenizer(), TEXTS[0])]
    _step(client, batch)
    path = client.save_weights_for_sampler("for-peft").result().path
    base = AutoModelForCausalLM.from_pretrained(client.host.model_path)
    model = PeftModel.from_pretrained(base, path).eval()
    tokens = batch[0].model_input.to_ints()
    ids = torch.tensor([tokens], device="cpu")  # where from_pretrained put the model
    with torch.no_grad():
        logits = model(ids).logits[0].log_softmax(-1)
    ours = (
        client.save_weights_and_get_sampling_client()
        .compute_logprobs(types.ModelInput.from_ints(tokens))
        .result()
    )
    theirs = logits[:-1].gather(-1, ids[0, 1:, None]).squeeze(-1).tolist()
    assert ours[1:] == pytest.approx(theirs, abs=1e-5)
