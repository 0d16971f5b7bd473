"""Which of train_core's losses (train_core/losses.py, the formulas) the local engine runs for the
`loss_fn` a request names."""

from __future__ import annotations

from kitchen.engine.errors import BackendError
from train_core.losses import LOSSES, LossFn


def loss_fn_named(loss_fn: str) -> LossFn:
    """The loss function called `loss_fn`, or a BackendError listing the supported ones."""
    if loss_fn in LOSSES:
        return LOSSES[loss_fn]
    supported = ", ".join(LOSSES)
    raise BackendError(
        f"loss_fn {loss_fn!r} is not supported by the local engine; expected one of {supported}"
    )
