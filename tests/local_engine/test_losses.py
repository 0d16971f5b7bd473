"""Tinker's losses: values against their documented formulas, and the direction each one moves the
policy on a hand-made datum (one sampled token after a short prompt)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from tinker import types

from kitchen.ports import GRAD_NORM_METRIC
from train_core.losses import LOSSES, cispo, dro, importance_sampling, ppo

from .conftest import TINY, rl_datum

PROMPT = [5, 17, 42, 99, 7]
TARGET = 123


def _inputs(q: list[float], a: list[float]) -> dict[str, torch.Tensor]:
    return {"logprobs": torch.tensor([q]), "advantages": torch.tensor([a])}


def test_loss_values_follow_the_documented_formulas() -> None:
    lp = torch.tensor([[-1.0, -2.0, -0.5]])
    q, a = [-1.2, -1.0, -0.5], [1.0, -2.0, 0.5]
    inputs = _inputs(q, a)
    ratio = np.exp(np.array([-1.0, -2.0, -0.5]) - np.array(q))
    np.testing.assert_allclose(
        importance_sampling(lp, inputs, {}).numpy()[0], -ratio * a, rtol=1e-6
    )
    clipped = np.clip(ratio, 0.9, 1.1)
    want_ppo = -np.minimum(ratio * a, clipped * a)
    config = {"clip_low_threshold": 0.9, "clip_high_threshold": 1.1}
    np.testing.assert_allclose(ppo(lp, inputs, config).numpy()[0], want_ppo, rtol=1e-6)
    want_cispo = -(clipped * np.array([-1.0, -2.0, -0.5]) * a)
    np.testing.assert_allclose(cispo(lp, inputs, config).numpy()[0], want_cispo, rtol=1e-6)
    want_dro = -(
        np.array([-1.0, -2.0, -0.5]) * a - 0.5 * 0.3 * (np.array([-1.0, -2.0, -0.5]) - q) ** 2
    )
    np.testing.assert_allclose(dro(lp, inputs, {"beta": 0.3}).numpy()[0], want_dro, rtol=1e-6)


def test_ppo_has_no_gradient_outside_the_clip_range() -> None:
    lp = torch.tensor([[-0.5]], requires_grad=True)
    inputs = _inputs([-1.0], [1.0])  # ratio e^0.5 = 1.65 > 1.2 with a positive advantage
    ppo(lp, inputs, {}).sum().backward()
    assert lp.grad is not None and lp.grad.item() == 0.0
    lp.grad = None
    cispo(
        lp, inputs, {}
    ).sum().backward()  # CISPO keeps the gradient, weighted by the clipped ratio
    assert lp.grad is not None and lp.grad.item() == pytest.approx(-1.2)


def _target_logprob(client: Any) -> float:
    out = client.forward([rl_datum(PROMPT, TARGET, 0.0, 0.0)], "importance_sampling").result()
    return float(out.loss_fn_outputs[0]["logprobs"].to_numpy()[-1])


@pytest.mark.parametrize("loss_fn", ["importance_sampling", "ppo", "cispo", "dro", "gspo"])
@pytest.mark.parametrize("advantage", [1.0, -1.0])
def test_rl_loss_moves_the_sampled_token_with_the_advantage(
    backend: Any, loss_fn: str, advantage: float
) -> None:
    client = backend.create_lora_training_client(TINY, rank=4, seed=1)
    before = _target_logprob(client)
    # On-policy: the sampler's logprob equals the learner's, so the ratio is 1 (inside any clip range).
    datum = rl_datum(PROMPT, TARGET, before, advantage)
    if loss_fn == "gspo":  # the sequence ratio spans the sampled tokens only
        mask = np.zeros(len(PROMPT), dtype=np.float32)
        mask[-1] = 1.0
        inputs = {**datum.loss_fn_inputs, "sequence_ratio_mask": types.TensorData.from_numpy(mask)}
        datum = types.Datum(model_input=datum.model_input, loss_fn_inputs=inputs)
    client.forward_backward([datum], loss_fn).result()
    client.optim_step(types.AdamParams(learning_rate=1e-3)).result()
    after = _target_logprob(client)
    assert (after - before) * advantage > 0, f"{loss_fn}: logprob went {before:.4f} -> {after:.4f}"


def test_dro_penalty_pulls_the_policy_back_to_the_sampler(backend: Any) -> None:
    client = backend.create_lora_training_client(TINY, rank=4, seed=1)
    before = _target_logprob(client)
    datum = rl_datum(PROMPT, TARGET, before - 1.0, 0.0)  # no advantage; the sampler liked it less
    client.forward_backward([datum], "dro", {"beta": 1.0}).result()
    client.optim_step(types.AdamParams(learning_rate=1e-3)).result()
    assert _target_logprob(client) < before


def test_ppo_outside_clip_range_leaves_weights_alone(backend: Any) -> None:
    client = backend.create_lora_training_client(TINY, rank=4, seed=1)
    before = _target_logprob(client)
    datum = rl_datum(PROMPT, TARGET, before - 1.0, 1.0)  # ratio e > 1.2, advantage > 0: clipped
    result = client.forward_backward([datum], "ppo").result()
    metrics = client.optim_step(types.AdamParams(learning_rate=1e-3)).result().metrics
    assert metrics is not None and metrics[GRAD_NORM_METRIC] == 0.0
    assert result.metrics["loss:sum"] == pytest.approx(-1.2, rel=1e-5)  # -clip(r) * A
    assert _target_logprob(client) == pytest.approx(before, abs=1e-6)


def test_clip_thresholds_come_from_loss_fn_config(backend: Any) -> None:
    client = backend.create_lora_training_client(TINY, rank=4, seed=1)
    before = _target_logprob(client)
    datum = rl_datum(PROMPT, TARGET, before - 1.0, 1.0)
    wide = {"clip_low_threshold": 0.1, "clip_high_threshold": 10.0}
    loss = client.forward([datum], "ppo", wide).result().metrics["loss:sum"]
    assert loss == pytest.approx(-np.e, rel=1e-4)  # ratio e is inside [0.1, 10]: unclipped


def test_every_documented_loss_is_available() -> None:
    assert {"cross_entropy", "importance_sampling", "ppo", "cispo", "dro"} <= set(LOSSES)


def test_per_datum_clip_thresholds_override_the_batch_ones(backend: Any) -> None:
    client = backend.create_lora_training_client(TINY, rank=4, seed=1)
    before = _target_logprob(client)
    plain = rl_datum(PROMPT, TARGET, before - 1.0, 1.0)
    n = len(PROMPT)
    wide = types.Datum(
        model_input=plain.model_input,
        loss_fn_inputs={
            **plain.loss_fn_inputs,
            "clip_low_threshold": np.full(n, 0.1, dtype=np.float32),
            "clip_high_threshold": np.full(n, 10.0, dtype=np.float32),
        },
    )
    loss = client.forward([wide, plain], "ppo").result().metrics["loss:sum"]
    assert loss == pytest.approx(
        -(np.e + 1.2), rel=1e-4
    )  # unclipped e, plus the default-clipped 1.2
