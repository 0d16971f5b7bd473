"""RL interfaces and the data that flows from rollouts to training.

Names, fields and async signatures follow tinker-cookbook 0.6.1 (`tinker_cookbook.rl.types`) so an
Env, EnvGroupBuilder or RLDataset written for it runs in Kitchen unchanged. Kitchen's rollout code
duck-types these (it never checks isinstance against the classes here), so a cookbook subclass works.

Shape suffixes: _G over the trajectories of one group, _P over the groups of a batch.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, TypeAlias

from tinker import types
from typing_extensions import TypedDict

from train_core.completers import StopCondition, TokensWithLogprobs

Action: TypeAlias = list[int]
Observation: TypeAlias = types.ModelInput
Logprobs: TypeAlias = list[float]
Metrics: TypeAlias = dict[str, float | int]
Logs: TypeAlias = dict[str, str | int | float]

__all__ = [
    "PARSE_ERROR_MASKED_METRIC_KEY",
    "STOP_METRIC_PREFIX",
    "Action",
    "ActionExtra",
    "Env",
    "EnvGroupBuilder",
    "InitialObservationOverflow",
    "Logprobs",
    "Logs",
    "Metrics",
    "Observation",
    "RLDataset",
    "RLDatasetBuilder",
    "RLDatasetFactory",
    "RLEnvContext",
    "RolloutError",
    "StepResult",
    "StopCondition",
    "StopReason",
    "TokensWithLogprobs",
    "Trajectory",
    "TrajectoryGroup",
    "Transition",
    "stop_reason_from_metrics",
]


class StopReason(StrEnum):
    """Why an episode ended; envs report it as a one-hot metric `stop/<reason>` = 1.0."""

    COMPLETED = "completed"
    TOOL_STOPPED = "tool_stopped"
    MAX_TURNS = "max_turns"
    MAX_TOKENS = "max_tokens"
    MAX_SAMPLED_TOKENS = "max_sampled_tokens"
    MAX_TOOL_CALLS = "max_tool_calls"
    CONTEXT_OVERFLOW = "context_overflow"
    PARSE_ERROR = "parse_error"
    ROLLOUT_TIMEOUT = "rollout_timeout"


STOP_METRIC_PREFIX = "stop/"
"""Metric-key prefix of the one-hot stop-reason metrics."""

PARSE_ERROR_MASKED_METRIC_KEY = "parse_error_masked"
"""A transition whose metrics hold this key at >= 1 contributes no loss (mask and advantage 0)."""


def stop_reason_from_metrics(metrics: Metrics) -> str | None:
    """The `<reason>` of the first `stop/<reason>` key in a transition's metrics, if any."""
    for key in metrics:
        if key.startswith(STOP_METRIC_PREFIX):
            return key.removeprefix(STOP_METRIC_PREFIX)
    return None


@dataclass(frozen=True)
class InitialObservationOverflow:
    """Returned by `Env.initial_observation` when the prompt alone exceeds the token budget.

    The rollout then ends at once with one empty transition carrying this reward and metrics:
    no training tokens, but the reward still counts in the group's baseline.
    """

    reward: float
    metrics: Metrics = field(default_factory=dict)
    logs: Logs = field(default_factory=dict)


@dataclass
class StepResult:
    """What `Env.step` returns."""

    reward: float
    episode_done: bool
    next_observation: Observation
    """The next prompt (or the final observation when episode_done)."""
    next_stop_condition: StopCondition
    metrics: Metrics = field(default_factory=dict)
    """Numbers averaged into the training log (e.g. `correct`, `format`)."""
    logs: Logs = field(default_factory=dict)
    """Diagnostics for transcripts; never aggregated."""


@dataclass
class Transition:
    """One turn: the observation seen, the action sampled, the reward it earned."""

    ob: Observation
    ac: TokensWithLogprobs
    reward: float
    episode_done: bool
    metrics: Metrics = field(default_factory=dict)
    logs: Logs = field(default_factory=dict)


class ActionExtra(TypedDict, total=False):
    """Optional metadata passed with an action to `Env.step`."""

    stop_reason: types.StopReason
    """"stop" (a stop sequence fired) or "length" (max_tokens reached)."""


class Env(ABC):
    """A single-use environment: one episode, then discard it."""

    @abstractmethod
    async def initial_observation(
        self,
    ) -> tuple[Observation, StopCondition] | InitialObservationOverflow:
        """The first prompt and its stop condition (or an overflow sentinel)."""

    @abstractmethod
    async def step(self, action: Action, *, extra: ActionExtra | None = None) -> StepResult:
        """Apply the sampled tokens; return the reward and what comes next."""


@dataclass(frozen=True)
class Trajectory:
    """One episode: its transitions and the observation after the last action."""

    transitions: list[Transition]
    final_ob: Observation
    stop_reason: str | None = None
    """Usually a StopReason value, mirrored from the last transition's `stop/<reason>` metric."""


@dataclass(frozen=True)
class RolloutError:
    """An error captured from a failed rollout (kept on the group by error-tolerant strategies)."""

    error_type: str
    error_message: str


class EnvGroupBuilder(ABC):
    """Builds the envs of one group: GRPO centres rewards across it, and the group reward
    function sees all its trajectories (pairwise or multi-agent rewards)."""

    @abstractmethod
    async def make_envs(self) -> Sequence[Env]:
        """The environments of this group, one trajectory each."""

    async def compute_group_rewards(
        self, trajectory_group: list[Trajectory], env_group: Sequence[Env]
    ) -> list[tuple[float, Metrics]]:
        """(reward, metrics) per trajectory, added to its per-step rewards. Default: zero."""
        return [(0.0, {}) for _ in trajectory_group]

    async def cleanup(self) -> None:
        """Release what make_envs created; always called after the group, also on error.

        Must be idempotent and must not raise (an exception here would hide the rollout's own).
        """
        return None

    def logging_tags(self) -> list[str]:
        """Tags to break metrics down by (`env/<tag>/...`), e.g. ["gsm8k", "math"]."""
        return []


@dataclass
class TrajectoryGroup:
    """The trajectories of one EnvGroupBuilder with their group rewards and metrics."""

    trajectories_G: list[Trajectory]
    final_rewards_G: list[float]
    """From EnvGroupBuilder.compute_group_rewards, one per trajectory."""
    metrics_G: list[Metrics]
    rollout_errors: list[RolloutError] = field(default_factory=list)

    def get_total_rewards(self) -> list[float]:
        """Per trajectory: the sum of its step rewards plus its group reward."""
        if len(self.trajectories_G) != len(self.final_rewards_G):
            raise ValueError(
                f"TrajectoryGroup: {len(self.trajectories_G)} trajectories but "
                f"{len(self.final_rewards_G)} final rewards; expected one reward per trajectory"
            )
        return [
            sum(t.reward for t in traj.transitions) + final_reward
            for traj, final_reward in zip(self.trajectories_G, self.final_rewards_G, strict=True)
        ]


class RLDataset(ABC):
    """Batches of EnvGroupBuilders: `get_batch(i)` for 0 <= i < len(dataset)."""

    @abstractmethod
    def get_batch(self, index: int) -> Sequence[EnvGroupBuilder]: ...

    @abstractmethod
    def __len__(self) -> int: ...


class RLDatasetBuilder(ABC):
    """Builds the training dataset and an optional test dataset, once, at the start of a run.

    tinker-cookbook makes these `chz` classes; Kitchen only needs the async call, so a dataclass
    or pydantic subclass works the same.
    """

    @abstractmethod
    async def __call__(self) -> tuple[RLDataset, RLDataset | None]: ...


@dataclass(frozen=True)
class RLEnvContext:
    """What an env dataset is built from: the run's renderer and tokenizer, and the dataset store."""

    renderer: Any
    tokenizer: Any
    datasets: Any = None


RLDatasetFactory: TypeAlias = Callable[..., Awaitable[tuple[Any, Any]] | tuple[Any, Any]]
"""ctx -> (train RLDataset, test RLDataset | None), sync or async; (ctx, sandbox) -> ... for envs
that run code. A tinker-cookbook RLDatasetBuilder `b` plugs in as `lambda ctx: b()`."""
