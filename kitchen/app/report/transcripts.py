"""Transcripts for the page: RL rollouts with each response shaded by its advantage, SFT
before/after samples, and DPO pairs (only what the run directory holds).

A rollout record (kitchen.workflows.reinforcement.rollout.transcript_records) carries each
trajectory's total reward; its advantage here is the reward minus its group's mean, the
group-centred advantage every token of that response is trained with."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kitchen.app.report.rundata import number


@dataclass
class Turn:
    observation: str  # what the env added since the previous turn
    response: str
    reward: float | None
    metrics: dict[str, Any]


@dataclass
class TrajectoryView:
    reward: float
    advantage: float
    shade: str  # CSS background for the response tokens
    turns: list[Turn]


@dataclass
class GroupView:
    group: int
    tags: list[str]
    policy_version: Any
    mean_reward: float
    trajectories: list[TrajectoryView]
    prompt: str = ""  # the first observation, when every trajectory of the group shares it


@dataclass
class IterationView:
    iteration: int
    mean_reward: float
    groups: list[GroupView]
    groups_hidden: int = 0
    n_groups: int = 0


def shade(advantage: float, scale: float) -> str:
    """Green for a positive advantage, red for a negative one; stronger when larger."""
    if scale <= 0 or advantage == 0:
        return "transparent"
    alpha = min(abs(advantage) / scale, 1.0) * 0.45 + 0.08
    rgb = "46,160,67" if advantage > 0 else "214,39,40"
    return f"rgba({rgb},{alpha:.2f})"


def _turns(turns: list[dict[str, Any]]) -> list[Turn]:
    out, seen = [], ""
    for turn in turns:
        prompt, response = str(turn.get("prompt", "")), str(turn.get("response", ""))
        new = prompt[len(seen) :] if seen and prompt.startswith(seen) else prompt
        out.append(Turn(new, response, number(turn.get("reward")), dict(turn.get("metrics") or {})))
        seen = prompt + response
    return out


def _group(record: dict[str, Any]) -> GroupView:
    trajectories = record.get("trajectories") or []
    rewards = [number(t.get("reward")) or 0.0 for t in trajectories]
    mean = sum(rewards) / len(rewards) if rewards else 0.0
    views = [
        TrajectoryView(r, r - mean, "", _turns(t.get("turns") or []))
        for t, r in zip(trajectories, rewards, strict=True)
    ]
    group = GroupView(
        int(record.get("group", 0)),
        [str(t) for t in record.get("tags") or []],
        record.get("policy_version"),
        mean,
        views,
    )
    firsts = {v.turns[0].observation for v in views if v.turns}
    if len(views) > 1 and len(firsts) == 1 and all(v.turns for v in views):
        group.prompt = firsts.pop()
        for v in views:
            v.turns[0].observation = ""
    return group


def _spread(items: list[int], limit: int) -> list[int]:
    """At most `limit` items, evenly spaced, the first and last always kept."""
    if len(items) <= limit:
        return items
    picks = {round(i * (len(items) - 1) / (limit - 1)) for i in range(limit)}
    return [items[i] for i in sorted(picks)]


def rollout_views(
    rollouts: dict[int, list[dict[str, Any]]], max_iterations: int = 40, max_groups: int = 8
) -> list[IterationView]:
    views = []
    for iteration in _spread(sorted(rollouts), max_iterations):
        groups = [_group(g) for g in rollouts[iteration]]
        all_rewards = [t.reward for g in groups for t in g.trajectories]
        scale = max((abs(t.advantage) for g in groups for t in g.trajectories), default=0.0)
        for g in groups:
            for t in g.trajectories:
                t.shade = shade(t.advantage, scale)
        views.append(
            IterationView(
                iteration,
                sum(all_rewards) / len(all_rewards) if all_rewards else 0.0,
                groups[:max_groups],
                max(len(groups) - max_groups, 0),
                len(groups),
            )
        )
    return views


PAIR_COLUMNS = ("prompt", "chosen", "rejected", "chosen_reward", "rejected_reward", "margin")


def pair_columns(pairs: list[dict[str, Any]]) -> list[str]:
    """The columns of a pairs file that its records have, in reading order."""
    present = {k for p in pairs for k in p}
    return [c for c in PAIR_COLUMNS if c in present] + sorted(present - set(PAIR_COLUMNS))
