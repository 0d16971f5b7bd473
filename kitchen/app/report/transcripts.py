"""Transcripts for the page: RL rollouts with each response shaded by its advantage, SFT
before/after samples, and DPO pairs (only what the run directory holds).

A rollout record (kitchen.workflows.reinforcement.rollout.transcript_records) carries each
trajectory's total reward and, per turn, the sampled tokens as text pieces and the advantage the
run's estimator gave the turn (every token of the turn trains with it): each token is shaded by
it. A record written before turns carried advantages falls back to the reward minus the group's
mean (group_mean's advantage) over the whole response."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kitchen.app.report.rundata import number

# A record's "images" list -> the thumbnails to show (report/thumbnails.py).
Pictures = Callable[[object], list[str]]


@dataclass
class Turn:
    observation: str  # what the env added since the previous turn
    response: str
    reward: float | None
    metrics: dict[str, Any]
    tokens: list[str] = field(default_factory=list)  # the response's sampled tokens, as text
    advantage: float | None = None  # what each of its tokens trains with (None: not recorded)
    shade: str = "transparent"
    images: list[str] = field(default_factory=list)  # thumbnails of the observation's pictures


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
    images: list[str] = field(default_factory=list)  # the shared prompt's pictures


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


def _no_pictures(names: object) -> list[str]:
    return []


def _turns(turns: list[dict[str, Any]], pictures: Pictures = _no_pictures) -> list[Turn]:
    out, seen = [], ""
    for turn in turns:
        prompt, response = str(turn.get("prompt", "")), str(turn.get("response", ""))
        new = prompt[len(seen) :] if seen and prompt.startswith(seen) else prompt
        tokens = [str(t) for t in turn.get("tokens") or []]
        out.append(
            Turn(
                new,
                response,
                number(turn.get("reward")),
                dict(turn.get("metrics") or {}),
                tokens if "".join(tokens) == response else [],  # pieces must rebuild the text
                number(turn.get("advantage")),
                images=pictures(turn.get("images")),
            )
        )
        seen = prompt + response
    return out


def _group(record: dict[str, Any], pictures: Pictures = _no_pictures) -> GroupView:
    trajectories = record.get("trajectories") or []
    rewards = [number(t.get("reward")) or 0.0 for t in trajectories]
    mean = sum(rewards) / len(rewards) if rewards else 0.0
    views = []
    for t, r in zip(trajectories, rewards, strict=True):
        turns = _turns(t.get("turns") or [], pictures)
        recorded = [x.advantage for x in turns if x.advantage is not None]
        if len(recorded) != len(turns) or not turns:  # an older transcript: group_mean's value
            recorded = [r - mean]
            for x in turns:
                x.advantage = r - mean
        views.append(TrajectoryView(r, sum(recorded) / len(recorded), "", turns))
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
        group.images = views[0].turns[0].images
        for v in views:
            v.turns[0].observation = ""
            v.turns[0].images = []
    return group


def _spread(items: list[int], limit: int) -> list[int]:
    """At most `limit` items, evenly spaced, the first and last always kept."""
    if len(items) <= limit:
        return items
    picks = {round(i * (len(items) - 1) / (limit - 1)) for i in range(limit)}
    return [items[i] for i in sorted(picks)]


def rollout_views(
    rollouts: dict[int, list[dict[str, Any]]],
    max_iterations: int = 40,
    max_groups: int = 8,
    pictures: Pictures = _no_pictures,
) -> list[IterationView]:
    views = []
    for iteration in _spread(sorted(rollouts), max_iterations):
        groups = [_group(g, pictures) for g in rollouts[iteration]]
        all_rewards = [t.reward for g in groups for t in g.trajectories]
        turns = [x for g in groups for t in g.trajectories for x in t.turns]
        scale = max((abs(x.advantage or 0.0) for x in turns), default=0.0)
        for g in groups:
            for t in g.trajectories:
                t.shade = shade(t.advantage, scale)
                for x in t.turns:
                    x.shade = shade(x.advantage or 0.0, scale)
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


PAIR_COLUMNS = (
    "pair",
    "prompt",
    "chosen",
    "rejected",
    "chosen_reward",
    "rejected_reward",
    "margin",
)


def pair_columns(pairs: list[dict[str, Any]]) -> list[str]:
    """The columns of a pairs file that its records have, in reading order (the step heads its
    section, so it is no column)."""
    present = {k for p in pairs for k in p} - {"step"}
    return [c for c in PAIR_COLUMNS if c in present] + sorted(present - set(PAIR_COLUMNS))


@dataclass
class PairStep:
    step: Any
    pairs: list[dict[str, Any]]
    mean_margin: float | None


def pair_steps(pairs: list[dict[str, Any]], max_steps: int = 40) -> list[PairStep]:
    """The pairs by logged step (records without a step form one section), at most `max_steps`
    steps, evenly spaced, the first and last kept."""
    by_step: dict[Any, list[dict[str, Any]]] = {}
    for p in pairs:
        by_step.setdefault(p.get("step"), []).append(p)
    keys = list(by_step)
    out = []
    for i in _spread(list(range(len(keys))), max_steps):
        rows = by_step[keys[i]]
        margins = [m for m in (number(p.get("margin")) for p in rows) if m is not None]
        out.append(PairStep(keys[i], rows, sum(margins) / len(margins) if margins else None))
    return out
