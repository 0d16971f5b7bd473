"""optim_step's gradient norm is Tinker's (GRAD_NORM_METRIC): the L2 norm, before clipping, over the
trained parameters, of the gradient of the summed forward_backward losses since the last step.
Checked against a gradient computed directly (full logits, one graph, summed loss), and on the fake
backend against its one-parameter rule."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
import torch
from tinker import types

from kitchen.adapters.fake import FakeBackend
from kitchen.adapters.local.model.lora import adapter_parameters
from kitchen.ports import GRAD_NORM_METRIC
from tests.helpers import engine_generator

from .conftest import TINY, take_grads
from .test_builtin_grads import one_graph, rl_data

CLIPPING = types.AdamParams(learning_rate=1e-3, grad_clip_norm=1e-3)  # far below the norm


def global_norm(grads: dict[str, Any]) -> float:
    return math.sqrt(sum(float(g.double().pow(2).sum()) for g in grads.values()))


@pytest.mark.parametrize("loss_fn", ["cross_entropy", "importance_sampling"])
def test_local_grad_norm_is_the_unclipped_norm_of_the_summed_loss(
    backend: Any, loss_fn: str
) -> None:
    client = backend.create_lora_training_client(TINY, rank=4, seed=3)
    data = rl_data(loss_fn)
    generator = engine_generator(0)
    with client.host.use(client.adapter) as model, torch.enable_grad():
        params = adapter_parameters(model, client.adapter)
        for p in params.values():  # B = 0 would give A no gradient
            p.data.normal_(0.0, 0.05, generator=generator)
        one_graph(model, data, loss_fn)  # sum over tokens and data, as Tinker's losses are
        want = global_norm(take_grads(client))
    # Two calls: the norm is of the gradient accumulated since the last step.
    client.forward_backward(data[:1], loss_fn)
    client.forward_backward(data[1:], loss_fn)
    got = client.optim_step(CLIPPING).result().metrics[GRAD_NORM_METRIC]
    assert got == pytest.approx(want, rel=1e-4)
    assert got > 100 * CLIPPING.grad_clip_norm  # reported before clipping
    # The next step starts from no gradient.
    assert client.optim_step(CLIPPING).result().metrics[GRAD_NORM_METRIC] == 0.0


def test_fake_grad_norm_follows_its_one_parameter_rule() -> None:
    client = FakeBackend().create_lora_training_client("fake", rank=4)
    weights = [np.array([0.0, 1.0, 1.0], np.float32), np.array([0.5, 0.5], np.float32)]
    data = [
        types.Datum(
            model_input=types.ModelInput.from_ints([1] * len(w)),
            loss_fn_inputs={"target_tokens": np.ones(len(w), np.int64), "weights": w},
        )
        for w in weights
    ]
    client.forward_backward(data[:1], "cross_entropy").result()
    client.forward_backward(data[1:], "cross_entropy").result()
    # loss = -sum(w * theta): gradient -sum(w) = -3 over both calls.
    assert client.optim_step(CLIPPING).result().metrics[GRAD_NORM_METRIC] == pytest.approx(3.0)

    def doubled_nll(data: Any, logprobs: list[torch.Tensor]) -> tuple[torch.Tensor, dict]:
        return -2 * sum(lp.sum() for lp in logprobs), {}

    client.forward_backward_custom(data, doubled_nll).result()
    # -2 * theta per target logprob, 5 of them: gradient -10.
    assert client.optim_step(CLIPPING).result().metrics[GRAD_NORM_METRIC] == pytest.approx(10.0)
