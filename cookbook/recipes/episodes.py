"""The per-episode limits of the multi-turn tool recipes (code_rl, search_tool), read from their
configs in one place: their envs' settings (CodeEnvSettings, SearchSettings) share these fields."""

from __future__ import annotations

from typing import Any, Protocol


class EpisodeFields(Protocol):
    max_turns: int
    format_coef: float
    max_trajectory_tokens: int
    max_tokens: int
    context_overflow_reward: float


def episode_limits(cfg: EpisodeFields) -> dict[str, Any]:
    """Turns, format penalty and token budget of one episode, as its settings' keywords; a reply
    may use all of the rollout's max_tokens."""
    return {
        "max_turns": cfg.max_turns,
        "format_coef": cfg.format_coef,
        "max_trajectory_tokens": cfg.max_trajectory_tokens,
        "max_generation_tokens": cfg.max_tokens,
        "context_overflow_reward": cfg.context_overflow_reward,
    }
