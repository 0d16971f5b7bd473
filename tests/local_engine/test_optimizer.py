"""adam_step applies every AdamParams field; checked on one scalar parameter where Adam's update has
a closed form (beta1 = beta2 = 0: update = lr * g / (|g| + eps))."""

from __future__ import annotations

import pytest
import torch
from tinker import types

from kitchen.adapters.local.train.optimizer import adam_step, make_optimizer
from kitchen.ports import GRAD_NORM_METRIC


def _one_step(grad: float, start: float = 1.0, **adam: float) -> tuple[float, dict[str, float]]:
    param = torch.nn.Parameter(torch.tensor([start]))
    optimizer = make_optimizer([param])
    param.grad = torch.tensor([grad])
    params = types.AdamParams(beta1=0.0, beta2=0.0, **adam)
    metrics = adam_step(optimizer, params)
    assert param.grad is None  # gradients are cleared for the next accumulation
    return float(param.detach()[0]), metrics


def test_learning_rate_and_eps_set_the_step_size() -> None:
    value, metrics = _one_step(10.0, learning_rate=0.1, eps=1.0)
    assert value == pytest.approx(1.0 - 0.1 * 10 / 11)
    assert metrics[GRAD_NORM_METRIC] == pytest.approx(10.0)


def test_grad_clip_norm_scales_the_gradient_first() -> None:
    value, metrics = _one_step(10.0, learning_rate=0.1, eps=1.0, grad_clip_norm=1.0)
    assert value == pytest.approx(1.0 - 0.1 * 1 / 2, rel=1e-5)
    assert metrics[GRAD_NORM_METRIC] == pytest.approx(10.0)  # reported before clipping


def test_weight_decay_is_decoupled() -> None:
    value, _ = _one_step(0.0, start=2.0, learning_rate=0.1, weight_decay=0.5, eps=1.0)
    assert value == pytest.approx(2.0 * (1 - 0.1 * 0.5))


def test_betas_average_gradients_across_steps() -> None:
    param = torch.nn.Parameter(torch.tensor([0.0]))
    optimizer = make_optimizer([param])
    for grad in (1.0, -1.0):
        param.grad = torch.tensor([grad])
        adam_step(optimizer, types.AdamParams(learning_rate=1.0, beta1=0.5, beta2=0.0, eps=1e-12))
    # step 1: +-1 -> param -1; step 2: m = 0.5*0.5 + 0.5*(-1) = -0.25, m_hat = -0.25 / 0.75 -> +1/3
    assert float(param.detach()[0]) == pytest.approx(-1.0 + 1.0 / 3.0, rel=1e-5)
