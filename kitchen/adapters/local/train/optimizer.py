"""Adam with every `tinker.types.AdamParams` field, applied per call (so schedules work).

Weight decay is decoupled (AdamW), as Tinker documents; grad_clip_norm > 0 clips the global norm.
Each step reports that norm as Tinker does (`GRAD_NORM_METRIC`, kitchen/ports): before clipping,
over the trained parameters (the whole of each, when they are shards), of the summed loss the
accumulated gradients are of. The hosted service reports it only when grad_clip_norm > 0; the
local engine on every step.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tinker import types

from kitchen.ports import GRAD_NORM_METRIC


def make_optimizer(params: Sequence[Any]) -> Any:
    """An AdamW over `params` in a fixed order, so a saved state dict lines up on reload."""
    import torch

    defaults = types.AdamParams()
    return torch.optim.AdamW(
        list(params),
        lr=defaults.learning_rate,
        betas=(defaults.beta1, defaults.beta2),
        eps=defaults.eps,
        weight_decay=defaults.weight_decay,
        foreach=True,
    )


def adam_step(optimizer: Any, adam: types.AdamParams) -> dict[str, float]:
    """Apply one step with `adam`'s hyperparameters to the accumulated gradients, then clear them."""
    import torch

    params = [p for group in optimizer.param_groups for p in group["params"] if p.grad is not None]
    grad_norm = 0.0
    if params:
        norms = torch._foreach_norm([p.grad.detach() for p in params])
        total = torch.linalg.vector_norm(torch.stack([n.float() for n in norms]))
        if hasattr(total, "full_tensor"):  # shards' gradients (a DTensor, sharded_model.py)
            total = total.full_tensor()  # the norm of the whole gradient, on every rank
        grad_norm = float(total)
        if adam.grad_clip_norm > 0 and grad_norm > adam.grad_clip_norm:
            scale = adam.grad_clip_norm / (grad_norm + 1e-6)
            torch._foreach_mul_([p.grad for p in params], scale)
    for group in optimizer.param_groups:
        group["lr"] = adam.learning_rate
        group["betas"] = (adam.beta1, adam.beta2)
        group["eps"] = adam.eps
        group["weight_decay"] = adam.weight_decay
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return {GRAD_NORM_METRIC: grad_norm}


class AdamState:
    """One client's trained parameters, their AdamW state and the updates taken: what its
    optim_step advances and its checkpoints save and restore."""

    def __init__(self, params: list[Any]) -> None:
        self.params = params
        self.optimizer = make_optimizer(params)
        self.step = 0  # updates (optim_step calls) taken

    def restart(self) -> None:
        """A fresh AdamW over the same parameters (a load_state without the optimizer's state)."""
        self.optimizer = make_optimizer(self.params)
