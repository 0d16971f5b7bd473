"""Rollout metrics under tinker-cookbook's keys: `env/all/...`, `env/<tag>/...`, `by_group/...`.

The KL metrics between sampler and trainer live in `train_core.rl.kl` and are re-exported here.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence

import numpy as np

from train_core.rl.data import all_same
from train_core.rl.kl import compute_kl_sample_train
from train_core.rl.types import TrajectoryGroup

__all__ = [
    "compute_by_group_metrics",
    "compute_kl_sample_train",
    "compute_trajectory_metrics",
    "dict_mean",
    "trajectory_metrics",
]


def dict_mean(dicts: Sequence[Mapping[str, float | int | None]]) -> dict[str, float]:
    """Mean per key over the dicts that have it (missing and None values are skipped)."""
    values: dict[str, list[float]] = defaultdict(list)
    for d in dicts:
        for key, value in d.items():
            if value is not None:
                values[key].append(float(value))
    return {key: float(np.mean(vs)) for key, vs in values.items()}


def compute_by_group_metrics(
    trajectory_groups_P: Sequence[TrajectoryGroup], good_thresh: float = 0.5
) -> dict[str, float]:
    """Fractions of groups with mixed rewards, all >= good_thresh, or all below it."""
    n_groups = len(trajectory_groups_P)
    n_mixed = n_good = n_bad = 0
    for group in trajectory_groups_P:
        rewards_G = group.get_total_rewards()
        if not all_same(rewards_G):
            n_mixed += 1
        elif rewards_G and rewards_G[0] >= good_thresh:
            n_good += 1
        else:
            n_bad += 1
    denominator = max(n_groups, 1)
    return {
        "by_group/frac_mixed": n_mixed / denominator,
        "by_group/frac_all_good": n_good / denominator,
        "by_group/frac_all_bad": n_bad / denominator,
    }


def trajectory_metrics(trajectory_groups_P: Sequence[TrajectoryGroup]) -> dict[str, float]:
    """Unprefixed metrics of some groups: token counts, turns, mean reward, env metrics."""
    trajs = [traj for group in trajectory_groups_P for traj in group.trajectories_G]
    transitions = [t for traj in trajs for t in traj.transitions]
    total_turns = len(transitions)
    total_episodes = len(trajs)
    total_ac_tokens = sum(len(t.ac.tokens) for t in transitions)
    total_ob_tokens = sum(t.ob.length for t in transitions)
    out: dict[str, float] = {
        "ac_tokens_per_turn": total_ac_tokens / total_turns if total_turns else 0.0,
        "ob_tokens_per_turn": total_ob_tokens / total_turns if total_turns else 0.0,
        "turns_per_episode": total_turns / total_episodes if total_episodes else 0.0,
        "total_episodes": total_episodes,
        "total_turns": total_turns,
        "total_ac_tokens": total_ac_tokens,
        "total_ob_tokens": total_ob_tokens,
        "total_cached_ob_tokens": sum(
            getattr(t.ac, "prompt_cache_hit_tokens", 0) for t in transitions
        ),
    }
    rewards = [r for group in trajectory_groups_P for r in group.get_total_rewards()]
    out["reward/total"] = float(np.mean(rewards)) if rewards else 0.0
    # Step metrics and group-reward metrics are averaged together: an env may report a key such
    # as `format` per step while another reports it from compute_group_rewards.
    group_metrics = [m for group in trajectory_groups_P for m in group.metrics_G]
    out.update(dict_mean([t.metrics for t in transitions] + group_metrics))
    out.update(compute_by_group_metrics(trajectory_groups_P))
    return out


def compute_trajectory_metrics(
    trajectory_groups_P: Sequence[TrajectoryGroup], taglist_P: Sequence[Sequence[str]]
) -> dict[str, float]:
    """`env/all/<metric>` over all groups, plus `env/<tag>/<metric>` per logging tag when some
    tag selects a strict subset of the groups (a tag shared by every group adds nothing)."""
    if len(taglist_P) != len(trajectory_groups_P):
        raise ValueError(
            f"compute_trajectory_metrics: {len(trajectory_groups_P)} groups but "
            f"{len(taglist_P)} tag lists; expected one tag list per group"
        )
    groups_by_tag: dict[str, list[TrajectoryGroup]] = defaultdict(list)
    for tags, group in zip(taglist_P, trajectory_groups_P, strict=True):
        for tag in tags:
            groups_by_tag[tag].append(group)
    out: dict[str, float] = {}
    if any(len(groups) < len(trajectory_groups_P) for groups in groups_by_tag.values()):
        for tag, groups in groups_by_tag.items():
            out.update({f"env/{tag}/{k}": v for k, v in trajectory_metrics(groups).items()})
    out.update({f"env/all/{k}": v for k, v in trajectory_metrics(trajectory_groups_P).items()})
    return out
