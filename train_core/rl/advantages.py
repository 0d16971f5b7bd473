"""Advantages from a group's rewards, and the registry estimators plug into.

An estimator maps one TrajectoryGroup to one advantage per trajectory (advantages_G). What RL
trains on is one advantage per turn (`compute_turn_advantages`): a per-trajectory estimator's
value is broadcast to the trajectory's turns; `gae` gives each turn its own. The datum assembly
puts each turn's advantage on its action tokens.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Sequence

import numpy as np

from train_core.rl.types import TrajectoryGroup

AdvantageEstimator = Callable[[TrajectoryGroup], np.ndarray]
"""fn(group) -> advantages_G, float64, one entry per trajectory of the group."""

ADVANTAGE_ESTIMATORS: dict[str, AdvantageEstimator] = {}
"""Estimators by name; `compute_advantages(..., estimator=NAME)` looks names up here."""


def register_advantage_estimator(
    name: str,
) -> Callable[[AdvantageEstimator], AdvantageEstimator]:
    """Decorator adding an estimator to ADVANTAGE_ESTIMATORS under `name` (names are unique)."""

    def add(fn: AdvantageEstimator) -> AdvantageEstimator:
        if name in ADVANTAGE_ESTIMATORS and ADVANTAGE_ESTIMATORS[name] is not fn:
            raise ValueError(f"advantage estimator {name!r} is already registered")
        ADVANTAGE_ESTIMATORS[name] = fn
        return fn

    return add


def centre_rewards(rewards_G: np.ndarray) -> np.ndarray:
    """Rewards minus their mean (no division by the std, as tinker-cookbook does)."""
    rewards_G = np.asarray(rewards_G, dtype=np.float64)
    if rewards_G.size == 0:
        return rewards_G
    return rewards_G - rewards_G.mean()


@register_advantage_estimator("group_mean")
def group_mean_advantages(group: TrajectoryGroup) -> np.ndarray:
    """GRPO-style baseline: each trajectory's total reward minus the group's mean total reward."""
    return centre_rewards(np.asarray(group.get_total_rewards(), dtype=np.float64))


def get_advantage_estimator(name: str) -> AdvantageEstimator:
    """The estimator registered as `name`; an unknown name fails listing the known ones."""
    try:
        return ADVANTAGE_ESTIMATORS[name]
    except KeyError:
        known = sorted(ADVANTAGE_ESTIMATORS)
        close = difflib.get_close_matches(name, known, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ValueError(
            f"unknown advantage estimator {name!r}; expected one of {', '.join(known)}{hint}"
        ) from None


def compute_advantages(
    trajectory_groups_P: Sequence[TrajectoryGroup], estimator: str = "group_mean"
) -> list[np.ndarray]:
    """advantages_G for each group, by the named estimator."""
    fn = get_advantage_estimator(estimator)
    advantages_P: list[np.ndarray] = []
    for i, group in enumerate(trajectory_groups_P):
        advantages_G = np.asarray(fn(group), dtype=np.float64)
        if advantages_G.shape != (len(group.trajectories_G),):
            raise ValueError(
                f"advantage estimator {estimator!r} returned shape {advantages_G.shape} for group "
                f"{i}; expected ({len(group.trajectories_G)},), one value per trajectory"
            )
        advantages_P.append(advantages_G)
    return advantages_P


def compute_turn_advantages(
    trajectory_groups_P: Sequence[TrajectoryGroup],
    estimator: str = "group_mean",
    gamma: float = 1.0,
    lam: float = 1.0,
) -> list[list[np.ndarray]]:
    """turn_advantages_P: per group, per trajectory, advantages_T (one per turn). `gae` is per
    turn by nature (discount `gamma`, `lam`); any other estimator's advantage is broadcast to
    every turn of its trajectory, and takes no gamma or lambda."""
    if estimator == "gae":
        from train_core.rl.gae import gae_turn_advantages

        return [gae_turn_advantages(g, gamma, lam) for g in trajectory_groups_P]
    if (gamma, lam) != (1.0, 1.0):
        raise ValueError(f"gamma and lambda apply to the gae estimator; estimator is {estimator!r}")
    return [
        [
            np.full(len(traj.transitions), a, dtype=np.float64)
            for traj, a in zip(g.trajectories_G, advantages_G, strict=True)
        ]
        for g, advantages_G in zip(
            trajectory_groups_P, compute_advantages(trajectory_groups_P, estimator), strict=True
        )
    ]
