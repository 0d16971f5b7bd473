"""The knobs of a tool episode, as values: its budgets, what a malformed tool call costs, and
how a budget stop changes the reward (tinker-cookbook 0.6.1's RolloutLimits, ParseErrorPolicy
and TerminationRewardPolicy, reduced to what a message-level env can enforce)."""

from __future__ import annotations

from dataclasses import dataclass

from train_core.rl.types import StopReason

DEFAULT_RETRY_MESSAGE = "The previous message had a formatting issue.\nError: {details}"


@dataclass(frozen=True)
class ToolBudget:
    """Per-episode limits; None is unlimited. Each one, when hit, ends the episode with its
    stop reason and the episode is graded like any other (then the termination policy applies).

    - max_turns: assistant turns (sampling calls); tool calls on the last turn are not run,
      since no later turn could read their results.
    - max_tool_calls: calls run; a turn asking for more runs the allowed prefix, then stops.
    - max_sampled_tokens: sampled tokens summed over turns (checked after each turn).
    - max_wall_s: seconds since the first observation (checked after each turn).
    """

    max_turns: int = 5
    max_tool_calls: int | None = None
    max_sampled_tokens: int | None = None
    max_wall_s: float | None = None

    def __post_init__(self) -> None:
        for name in ("max_turns", "max_tool_calls", "max_sampled_tokens", "max_wall_s"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ValueError(f"ToolBudget.{name} is {value}; expected > 0 or None")


@dataclass(frozen=True)
class ParseErrorPolicy:
    """A turn whose tool calls all fail to parse. Up to `max_consecutive` such turns in a row
    get `retry_message` (with `{details}`) as the next user message and `-penalty_per_error`;
    the one past that ends the episode with `terminal_reward` (stop `parse_error`). A clean
    turn resets the count. With no policy, the env's one-shot rule applies instead."""

    max_consecutive: int = 0
    retry_message: str = DEFAULT_RETRY_MESSAGE
    penalty_per_error: float = 0.0
    terminal_reward: float = 0.0

    def __post_init__(self) -> None:
        if self.max_consecutive < 0 or self.penalty_per_error < 0:
            raise ValueError("ParseErrorPolicy: max_consecutive and penalty_per_error are >= 0")
        if "{details}" not in self.retry_message:
            raise ValueError("ParseErrorPolicy.retry_message needs a {details} placeholder")


LIMIT_STOPS: tuple[str, ...] = (
    StopReason.MAX_TOKENS,
    StopReason.MAX_SAMPLED_TOKENS,
    StopReason.MAX_TURNS,
    StopReason.MAX_TOOL_CALLS,
    StopReason.ROLLOUT_TIMEOUT,
)
"""Stops a budget imposed, rather than the model's own choice to answer."""


@dataclass(frozen=True)
class TerminationPolicy:
    """Grade, then clamp: with `zero_reward_on_limit`, an episode that a budget stopped (its stop
    reason in `limit_stops`) keeps its grade only if it is <= 0, so running into a budget never
    pays while a bad answer's signal survives. `grader_timeout_s` bounds the reward function;
    `grade_whole_conversation=False` shows it only what the episode added to the prompt.
    `grader_failure_reward`, when set, is the reward of an episode whose grader raised or timed
    out (metric `grader_failed`), so a failing grader costs one episode, not the step; None
    lets the error propagate."""

    zero_reward_on_limit: bool = False
    limit_stops: tuple[str, ...] = LIMIT_STOPS
    grader_timeout_s: float | None = None
    grade_whole_conversation: bool = True
    grader_failure_reward: float | None = None

    def final_reward(self, reward: float, stop: str) -> float:
        if self.zero_reward_on_limit and stop in self.limit_stops:
            return min(reward, 0.0)
        return reward
