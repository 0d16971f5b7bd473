"""Multi-turn text environments written over messages, and the adapter that makes them an Env.

A MessageEnv sees assistant messages and answers with the next conversation; EnvFromMessageEnv
renders that conversation to tokens and parses sampled tokens back, as tinker-cookbook 0.6.1's
adapter does (without its rollout-limit and parse-error-policy plumbing).
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from dataclasses import dataclass, field

from tinker import types

from train_core.completers import RendererLike, StopCondition, termination_flags
from train_core.renderers.types import Message
from train_core.rl.types import (
    STOP_METRIC_PREFIX,
    Action,
    ActionExtra,
    Env,
    InitialObservationOverflow,
    Logs,
    Metrics,
    StepResult,
    StopReason,
)


@dataclass
class MessageStepResult:
    """What MessageEnv.step returns: the reward and the whole conversation so far."""

    reward: float
    episode_done: bool
    next_messages: list[Message]
    metrics: dict[str, float] = field(default_factory=dict)
    logs: Logs = field(default_factory=dict)
    next_stop_condition: StopCondition | None = None
    """None keeps the renderer's stop sequences."""


class MessageEnv(ABC):
    """An environment over messages rather than tokens."""

    @abstractmethod
    async def initial_observation(self) -> list[Message]:
        """The opening conversation."""

    @abstractmethod
    async def step(self, message: Message) -> MessageStepResult:
        """React to one assistant message."""

    async def observe_truncated_response(self, message: Message) -> list[Message] | None:
        """Record a response cut by max_tokens and continue; None (default) ends the episode."""
        return None

    async def add_messages(self, messages: list[Message]) -> list[Message] | None:
        """Append injected messages; None (default) means injection is not supported."""
        return None


def _stop_metric(reason: StopReason) -> str:
    return f"{STOP_METRIC_PREFIX}{reason}"


@dataclass(eq=False, repr=False)  # one episode's state: equal only to itself
class EnvFromMessageEnv(Env):
    """Token-level Env over a MessageEnv and a renderer.

    - A response cut by max_tokens (`stop_reason == "length"`) ends the episode with
      `context_overflow_reward`, unless `terminate_on_length=False` and the MessageEnv records it.
    - A response that does not parse cleanly gets `failed_parse_reward` (and ends the episode
      when `terminate_on_parse_error`).
    - With `max_trajectory_tokens`, a conversation whose next prompt plus
      `max_generation_tokens` would not fit ends with `context_overflow_reward`.
    """

    renderer: RendererLike
    message_env: MessageEnv
    failed_parse_reward: float = -1.0
    terminate_on_parse_error: bool = True
    max_trajectory_tokens: int | None = None
    max_generation_tokens: int | None = None
    context_overflow_reward: float = -0.1
    terminate_on_length: bool = True
    _base_stop_condition: StopCondition = field(init=False)
    example_id: str | None = field(init=False)

    def __post_init__(self) -> None:
        self._base_stop_condition = self.renderer.get_stop_sequences()
        self.example_id = getattr(self.message_env, "example_id", None)

    async def _render(self, messages: list[Message]) -> types.ModelInput:
        # Tokenising is CPU work; a thread keeps the event loop (other rollouts) moving.
        return await asyncio.to_thread(self.renderer.build_generation_prompt, messages)

    def _exceeds_context_limit(self, observation_length: int) -> bool:
        if self.max_trajectory_tokens is None:
            return False
        reserve = self.max_generation_tokens or 0
        return observation_length + reserve > self.max_trajectory_tokens

    def _terminal(self, reward: float, metrics: Metrics, logs: Logs | None = None) -> StepResult:
        return StepResult(
            reward=reward,
            episode_done=True,
            next_observation=types.ModelInput.empty(),
            next_stop_condition=self._base_stop_condition,
            metrics=metrics,
            logs=logs or {},
        )

    async def initial_observation(
        self,
    ) -> tuple[types.ModelInput, StopCondition] | InitialObservationOverflow:
        model_input = await self._render(await self.message_env.initial_observation())
        if self._exceeds_context_limit(model_input.length):
            return InitialObservationOverflow(
                reward=self.context_overflow_reward,
                metrics={"max_tokens_reached": 1.0, _stop_metric(StopReason.MAX_TOKENS): 1.0},
                logs={
                    "initial_observation_overflow": (
                        f"prompt of {model_input.length} tokens + max_generation_tokens "
                        f"{self.max_generation_tokens or 0} exceeds max_trajectory_tokens "
                        f"{self.max_trajectory_tokens}"
                    )
                },
            )
        return model_input, self._base_stop_condition

    async def step(self, action: Action, *, extra: ActionExtra | None = None) -> StepResult:
        if (extra or {}).get("stop_reason", "stop") == "length":
            if not self.terminate_on_length:
                continued = await self._continue_after_truncation(action)
                if continued is not None:
                    return continued
            return self._terminal(
                self.context_overflow_reward,
                {"max_tokens_reached": 1.0, _stop_metric(StopReason.MAX_TOKENS): 1.0},
            )

        message, termination = self.renderer.parse_response(action)
        is_clean, _ = termination_flags(termination)
        if not is_clean:
            metrics: Metrics = {"parse_error": 1.0}
            if self.terminate_on_parse_error:
                metrics[_stop_metric(StopReason.PARSE_ERROR)] = 1.0
            return StepResult(
                reward=self.failed_parse_reward,
                episode_done=self.terminate_on_parse_error,
                next_observation=types.ModelInput.empty(),
                next_stop_condition=self._base_stop_condition,
                metrics=metrics,
            )

        msg_step = await self.message_env.step(message)
        next_observation = await self._render(msg_step.next_messages)
        # Only a continuing episode needs room for another turn; a finished one keeps its reward.
        if not msg_step.episode_done and self._exceeds_context_limit(next_observation.length):
            return self._terminal(
                self.context_overflow_reward,
                {
                    **msg_step.metrics,
                    "context_overflow": 1.0,
                    _stop_metric(StopReason.CONTEXT_OVERFLOW): 1.0,
                },
                msg_step.logs,
            )
        return StepResult(
            reward=msg_step.reward,
            episode_done=msg_step.episode_done,
            next_observation=next_observation,
            next_stop_condition=msg_step.next_stop_condition or self._base_stop_condition,
            metrics=dict(msg_step.metrics),
            logs=msg_step.logs,
        )

    async def _continue_after_truncation(self, action: Action) -> StepResult | None:
        # A truncated turn rarely parses cleanly; keep whatever the parser recovered.
        message, _ = self.renderer.parse_response(action)
        updated = await self.message_env.observe_truncated_response(message)
        if updated is None:
            return None
        next_observation = await self._render(updated)
        if self._exceeds_context_limit(next_observation.length):
            return self._terminal(
                self.context_overflow_reward,
                {"context_overflow": 1.0, _stop_metric(StopReason.CONTEXT_OVERFLOW): 1.0},
            )
        return StepResult(
            reward=0.0,
            episode_done=False,
            next_observation=next_observation,
            next_stop_condition=self._base_stop_condition,
            logs={"truncated_turn": "sampling stopped on length; turn kept, episode continues"},
        )

    async def inject_messages(
        self, messages: list[Message]
    ) -> tuple[types.ModelInput, StopCondition]:
        """Add messages before the next sampling call (rollout hooks use this)."""
        updated = await self.message_env.add_messages(list(messages))
        if updated is None:
            raise TypeError(
                f"{type(self.message_env).__name__} does not support message injection "
                "(add_messages returned None)"
            )
        return await self._render(updated), self._base_stop_condition
