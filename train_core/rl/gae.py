"""Generalised advantage estimation (GAE) over the turns of multi-turn episodes, with the group's
mean return as the value baseline (no learned critic).

For one trajectory of T turns with per-turn rewards r_0 .. r_{T-1} (its group reward from
`EnvGroupBuilder.compute_group_rewards` is added to r_{T-1}), in a group of trajectories i:

    R_i     = sum_t gamma^t r_{i,t}                      discounted return of trajectory i
    b       = mean_i R_i                                 the group's mean return
    V(s_t)  = b while the episode runs (t < T), V(s_T) = 0 after its last turn
    delta_t = r_t + gamma * V(s_{t+1}) - V(s_t)          = r_t + gamma * b * [t < T-1] - b
    A_t     = sum_{l=0}^{T-1-t} (gamma * lambda)^l * delta_{t+l}

Every action token of turn t gets A_t. Special cases:
- lambda = 1: A_t = sum_{k>=t} gamma^(k-t) r_k - b (the return from turn t minus the baseline);
- gamma = lambda = 1 with only a final reward: every turn gets R_i - b, which is exactly the
  `group_mean` estimator (so the two agree on single-turn envs for any gamma, lambda = 1);
- lambda = 0: one-step TD errors, A_t = delta_t;
- lambda < 1 (gamma = 1, final reward only): A_t = lambda^(T-1-t) (R_i - b), less credit to
  turns further from the reward.

This is the only GAE: it is registered as the per-turn estimator `gae`, reached (like every
estimator) through `compute_turn_advantages(groups, "gae", gamma, lam)`. tinker-cookbook 0.6.1
has no GAE; the recursion is the standard one (Schulman et al. 2016) over turns.
"""

from __future__ import annotations

import numpy as np

from train_core.rl.advantages import discounted_future_sum, register_turn_advantage_estimator
from train_core.rl.types import Trajectory, TrajectoryGroup


def check_gae_params(gamma: float, lam: float) -> None:
    if not 0.0 <= gamma <= 1.0:
        raise ValueError(f"gae: gamma is {gamma}; expected 0 <= gamma <= 1")
    if not 0.0 <= lam <= 1.0:
        raise ValueError(f"gae: lambda is {lam}; expected 0 <= lambda <= 1")


def turn_rewards(traj: Trajectory, final_reward: float = 0.0) -> np.ndarray:
    """rewards_T: each turn's reward, the group reward added to the last turn."""
    rewards_T = np.asarray([t.reward for t in traj.transitions], dtype=np.float64)
    if rewards_T.size:
        rewards_T[-1] += final_reward
    return rewards_T


def discounted_return(rewards_T: np.ndarray, gamma: float) -> float:
    """R = sum_t gamma^t r_t (0 for an episode without turns)."""
    return float(discounted_future_sum(rewards_T, gamma)[:1].sum())


def gae_1d(rewards_T: np.ndarray, baseline: float, gamma: float, lam: float) -> np.ndarray:
    """advantages_T of one episode whose value is `baseline` at every turn and 0 after the last
    (see the module doc)."""
    values_T1 = np.append(np.full(rewards_T.size, baseline, dtype=np.float64), 0.0)
    deltas_T = rewards_T + gamma * values_T1[1:] - values_T1[:-1]
    return discounted_future_sum(deltas_T, gamma * lam)  # A_t = delta_t + gamma lambda A_{t+1}


@register_turn_advantage_estimator("gae")
def gae_turn_advantages(group: TrajectoryGroup, gamma: float, lam: float) -> list[np.ndarray]:
    """Per trajectory of the group: advantages_T, one per turn (the baseline is the group's mean
    discounted return)."""
    check_gae_params(gamma, lam)
    rewards_G = [
        turn_rewards(traj, final)
        for traj, final in zip(group.trajectories_G, group.final_rewards_G, strict=True)
    ]
    if not rewards_G:
        return []
    baseline = float(np.mean([discounted_return(r, gamma) for r in rewards_G]))
    return [gae_1d(r, baseline, gamma, lam) for r in rewards_G]
