"""Advantages: one per turn of every trajectory, by a named estimator.

What RL trains on is one advantage per turn, and `compute_turn_advantages(groups, estimator,
gamma, lam)` is the one route to it: it looks the estimator up in ADVANTAGE_ESTIMATORS by name and
calls it, whatever its kind (no name is special-cased). Two kinds plug in:
- per trajectory (`register_advantage_estimator`): fn(group) -> advantages_G, one value per
  trajectory, put on every turn of it; gamma and lambda do not apply (group_mean);
- per turn (`register_turn_advantage_estimator`): fn(group, gamma, lam) -> advantages_T per
  trajectory (gae, train_core/rl/gae.py).
The datum assembly puts each turn's advantage on its action tokens. `discounted_future_sum` is the
one discounted sum of RL: GAE's returns and recursion, and the discounted KL penalties (rl/kl.py,
distillation) use it.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from train_core.arrays import as_array
from train_core.rl.types import TrajectoryGroup

TrajectoryAdvantageFn = Callable[[TrajectoryGroup], np.ndarray]
"""fn(group) -> advantages_G, float64, one entry per trajectory of the group."""

TurnAdvantageFn = Callable[[TrajectoryGroup, float, float], list[np.ndarray]]
"""fn(group, gamma, lam) -> per trajectory of the group, advantages_T (one per turn)."""


@dataclass(frozen=True)
class PerTrajectory:
    """A per-trajectory estimator as a per-turn one: its value on every turn of the trajectory."""

    name: str
    fn: TrajectoryAdvantageFn

    def advantages_G(self, group: TrajectoryGroup) -> np.ndarray:
        advantages_G = np.asarray(self.fn(group), dtype=np.float64)
        if advantages_G.shape != (len(group.trajectories_G),):
            raise ValueError(
                f"advantage estimator {self.name!r} returned shape {advantages_G.shape} for a "
                f"group of {len(group.trajectories_G)} trajectories; expected one value per "
                "trajectory"
            )
        return advantages_G

    def __call__(self, group: TrajectoryGroup, gamma: float, lam: float) -> list[np.ndarray]:
        if (gamma, lam) != (1.0, 1.0):
            raise ValueError(
                f"gamma and lambda apply to the gae estimator; estimator is {self.name!r}, "
                "which gives one advantage per trajectory"
            )
        return [
            np.full(len(traj.transitions), a, dtype=np.float64)
            for traj, a in zip(group.trajectories_G, self.advantages_G(group), strict=True)
        ]


ADVANTAGE_ESTIMATORS: dict[str, TurnAdvantageFn] = {}
"""Estimators by name, each as a per-turn function; `compute_turn_advantages` looks names up here."""


def _add(name: str, estimator: TurnAdvantageFn) -> None:
    known = ADVANTAGE_ESTIMATORS.get(name)
    if known is not None and known != estimator:
        raise ValueError(f"advantage estimator {name!r} is already registered")
    ADVANTAGE_ESTIMATORS[name] = estimator


def register_advantage_estimator(
    name: str,
) -> Callable[[TrajectoryAdvantageFn], TrajectoryAdvantageFn]:
    """Decorator adding a per-trajectory estimator under `name` (names are unique)."""

    def add(fn: TrajectoryAdvantageFn) -> TrajectoryAdvantageFn:
        _add(name, PerTrajectory(name, fn))
        return fn

    return add


def register_turn_advantage_estimator(name: str) -> Callable[[TurnAdvantageFn], TurnAdvantageFn]:
    """Decorator adding a per-turn estimator fn(group, gamma, lam) under `name`."""

    def add(fn: TurnAdvantageFn) -> TurnAdvantageFn:
        _add(name, fn)
        return fn

    return add


def discounted_future_sum(x_T: Any, gamma: float) -> np.ndarray:
    """out[t] = sum_k gamma^k x[t+k], one backward pass (out[t] = x[t] + gamma * out[t+1])."""
    x_T = as_array(x_T)
    out_T = np.empty_like(x_T)
    running = 0.0
    for t in range(x_T.size - 1, -1, -1):
        running = x_T[t] + gamma * running
        out_T[t] = running
    return out_T


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


def get_advantage_estimator(name: str) -> TurnAdvantageFn:
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


def compute_turn_advantages(
    trajectory_groups_P: Sequence[TrajectoryGroup],
    estimator: str = "group_mean",
    gamma: float = 1.0,
    lam: float = 1.0,
) -> list[list[np.ndarray]]:
    """turn_advantages_P: per group, per trajectory, advantages_T (one per turn), by the named
    estimator with discount `gamma` and `lam` (which only per-turn estimators take)."""
    fn = get_advantage_estimator(estimator)
    return [fn(group, gamma, lam) for group in trajectory_groups_P]


def compute_advantages(
    trajectory_groups_P: Sequence[TrajectoryGroup], estimator: str = "group_mean"
) -> list[np.ndarray]:
    """advantages_G for each group, by a per-trajectory estimator (one value per trajectory).
    A per-turn estimator has no such value: it fails, pointing at `compute_turn_advantages`."""
    fn = get_advantage_estimator(estimator)
    if not isinstance(fn, PerTrajectory):
        raise ValueError(
            f"advantage estimator {estimator!r} gives one advantage per turn, not per "
            "trajectory; use compute_turn_advantages"
        )
    return [fn.advantages_G(group) for group in trajectory_groups_P]
