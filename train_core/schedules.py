"""Learning-rate schedules: tinker-cookbook 0.6.1's linear / cosine / constant, plus linear warmup.

0.6.1 (`utils/lr_scheduling.py`) multiplies the base LR by, at 0-indexed step s of S:
linear 1 - s/S, cosine 0.5 * (1 + cos(pi * s/S)), constant 1. It has no warmup; here
warmup_steps W > 0 ramps (s + 1)/W for s < W, so the first step already moves the weights, then
runs the chosen decay over the remaining S - W steps. W = 0 reproduces 0.6.1 exactly. A step at
or past S (a run resumed with fewer steps than it had) keeps the last step's rate, never a
negative one.
"""

from __future__ import annotations

import math
from typing import Literal, get_args

LRSchedule = Literal["linear", "cosine", "constant"]
LR_SCHEDULES: tuple[str, ...] = get_args(LRSchedule)


def compute_schedule_lr_multiplier(lr_schedule: str, step: int, total_steps: int) -> float:
    """0.6.1's decay multiplier for 0-indexed `step` of `total_steps`."""
    if total_steps <= 0:
        raise ValueError(f"lr schedule: total_steps is {total_steps}; expected > 0")
    if lr_schedule == "linear":
        return 1 - step / total_steps
    if lr_schedule == "cosine":
        return 0.5 * (1 + math.cos(math.pi * step / total_steps))
    if lr_schedule == "constant":
        return 1.0
    raise ValueError(
        f"lr schedule {lr_schedule!r} is unknown; expected one of {', '.join(LR_SCHEDULES)}"
    )


def lr_multiplier(
    step: int, total_steps: int, schedule: str = "constant", warmup_steps: int = 0
) -> float:
    """Warmup then decay multiplier in [0, 1] for 0-indexed `step`."""
    if warmup_steps < 0:
        raise ValueError(f"lr schedule: warmup_steps is {warmup_steps}; expected >= 0")
    if step < 0:
        raise ValueError(f"lr schedule: step is {step}; expected >= 0")
    if total_steps <= 0:
        raise ValueError(f"lr schedule: total_steps is {total_steps}; expected > 0")
    step = min(step, total_steps - 1)
    if step < warmup_steps:
        return (step + 1) / warmup_steps
    decay_steps = max(total_steps - warmup_steps, 1)
    return compute_schedule_lr_multiplier(schedule, step - warmup_steps, decay_steps)


def lr_at(
    step: int,
    total_steps: int,
    base_lr: float,
    schedule: str = "constant",
    warmup_steps: int = 0,
) -> float:
    """The learning rate to pass to optim_step at 0-indexed `step`."""
    return base_lr * lr_multiplier(step, total_steps, schedule, warmup_steps)
