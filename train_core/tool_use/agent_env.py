"""The generic tool-using agent env. Each turn the model's message is parsed by the renderer
(its tool-call format); tool calls run (dispatch.py) and their results are the next messages;
a turn without tool calls ends the episode, which `reward_fn` then grades over the messages.
Budgets, the parse-error rule and the termination rule are the values of policies.py.

Two layers, as every multi-turn env here: AgentToolMessageEnv works on messages; AgentToolEnv
is EnvFromMessageEnv (rendering, stop sequences, context overflow) plus the budgets that need
tokens or a clock (sampled tokens, wall time).

Metrics per turn: `turns`, `tool_calls` (calls run), `parse_error`, one `stop/<reason>` on the
last turn, and the reward function's own. Logs: `response` and `tool_result_<i>` (2000 chars).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from train_core.completers import RendererLike
from train_core.renderers.content import get_text_content
from train_core.renderers.types import Message
from train_core.rl.message_env import EnvFromMessageEnv, MessageEnv, MessageStepResult
from train_core.rl.types import STOP_METRIC_PREFIX, Action, ActionExtra, StepResult, StopReason
from train_core.tool_use.dispatch import ToolExecution, call_tools
from train_core.tool_use.function_tool import CallError, json_error
from train_core.tool_use.policies import ParseErrorPolicy, TerminationPolicy, ToolBudget
from train_core.tool_use.types import Tool, tool_spec

RewardResult = tuple[float, dict[str, float]]
RewardFn = Callable[[list[Message]], Awaitable[RewardResult]]
"""The episode's grade from its messages: (reward, metrics)."""

LOG_CHARS = 2000


def _stop(reason: str) -> str:
    return f"{STOP_METRIC_PREFIX}{reason}"


def tool_conversation(
    renderer: Any, tools: Sequence[Tool], messages: Sequence[Message], system_prompt: str = ""
) -> list[Message]:
    """`messages` after the renderer's declaration of `tools` (its tool-call format's prefix)."""
    specs = [tool_spec(t) for t in tools]
    return [*renderer.create_conversation_prefix_with_tools(specs, system_prompt), *messages]


def renderer_has_tools(renderer: Any, specs: Sequence[Any] = ()) -> bool:
    """Whether the renderer has a tool-call format (can declare `specs`)."""
    try:
        renderer.create_conversation_prefix_with_tools(list(specs))
    except (NotImplementedError, AttributeError):
        return False
    return True


@dataclass(eq=False, repr=False)  # one episode's state: equal only to itself
class AgentToolMessageEnv(MessageEnv):
    """One episode over `initial_messages` with `tools`; see the module doc.

    A turn whose tool calls all fail to parse: with `parse_errors` None, `failed_parse_reward`,
    and the episode ends when `terminate_on_parse_error`; with a ParseErrorPolicy, its rule.
    `unknown_tool_errors` renders the error of a call to a tool not in `tools`.
    """

    tools: Sequence[Tool]
    initial_messages: Sequence[Message]
    reward_fn: RewardFn
    budget: ToolBudget = field(default_factory=ToolBudget)
    execution: ToolExecution = "parallel"
    failed_parse_reward: float = -0.1
    terminate_on_parse_error: bool = True
    parse_errors: ParseErrorPolicy | None = None
    termination: TerminationPolicy = field(default_factory=TerminationPolicy)
    unknown_tool_errors: Callable[[CallError], str] = json_error
    example_id: str | None = None
    tools_by_name: dict[str, Tool] = field(init=False)
    history: list[Message] = field(init=False)
    turns: int = field(default=0, init=False)
    tool_calls_made: int = field(default=0, init=False)
    consecutive_parse_errors: int = field(default=0, init=False)
    done: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        names = [t.name for t in self.tools]
        if len(set(names)) != len(names):
            raise ValueError(f"tool names must be unique; got {names}")
        self.tools_by_name = {t.name: t for t in self.tools}
        # A copy: grade() cuts the prompt off the history by its length, which the caller must not change.
        self.initial_messages = list(self.initial_messages)
        self.history = list(self.initial_messages)

    async def initial_observation(self) -> list[Message]:
        return list(self.history)

    async def step(self, message: Message) -> MessageStepResult:
        self.turns += 1
        self.history.append(message)
        calls = list(message.get("tool_calls") or [])
        unparsed = list(message.get("unparsed_tool_calls") or [])
        metrics: dict[str, float] = {"turns": float(self.turns)}
        logs: dict[str, str | int | float] = {"response": get_text_content(message)[:LOG_CHARS]}
        last_turn = self.turns >= self.budget.max_turns
        if unparsed:
            metrics["parse_error"] = 1.0
            logs["parse_errors"] = "\n".join(u.error for u in unparsed)[:LOG_CHARS]
        if unparsed and not calls:
            return await self._parse_failure(unparsed, metrics, logs, last_turn)
        self.consecutive_parse_errors = 0
        if not calls or last_turn:
            stop = StopReason.MAX_TURNS if calls else StopReason.COMPLETED
            return await self.finish(stop, metrics, logs)
        remaining = self.budget.max_tool_calls
        if remaining is not None:
            remaining = max(remaining - self.tool_calls_made, 0)
        to_run = calls if remaining is None else calls[:remaining]
        metrics["tool_calls"] = float(len(to_run))
        results = await call_tools(
            self.tools_by_name, to_run, self.execution, self.unknown_tool_errors
        )
        self.tool_calls_made += len(to_run)
        stopped = False
        i = 0
        for result in results:
            stopped = stopped or result.should_stop
            for key, value in result.metrics.items():
                metrics[f"tool/{key}"] = metrics.get(f"tool/{key}", 0.0) + float(value)
            for m in result.messages:
                self.history.append(m)
                logs[f"tool_result_{i}"] = get_text_content(m)[:LOG_CHARS]
                i += 1
        if stopped:
            return await self.finish(StopReason.TOOL_STOPPED, metrics, logs)
        if len(to_run) < len(calls):
            logs["tool_calls_dropped"] = len(calls) - len(to_run)
            return await self.finish(StopReason.MAX_TOOL_CALLS, metrics, logs)
        return MessageStepResult(0.0, False, list(self.history), metrics, logs)

    async def _parse_failure(
        self,
        unparsed: list[Any],
        metrics: dict[str, float],
        logs: dict[str, str | int | float],
        last_turn: bool,
    ) -> MessageStepResult:
        policy = self.parse_errors
        if policy is None:
            done = self.terminate_on_parse_error or last_turn
            if done:
                metrics[_stop(StopReason.PARSE_ERROR)] = 1.0
                self.done = True
            return MessageStepResult(
                self.failed_parse_reward, done, list(self.history), metrics, logs
            )
        self.consecutive_parse_errors += 1
        if self.consecutive_parse_errors <= policy.max_consecutive and not last_turn:
            details = "\n".join(u.error for u in unparsed)[:16_000]
            retry: Message = {
                "role": "user",
                "content": policy.retry_message.format(details=details),
            }
            self.history.append(retry)
            return MessageStepResult(
                -policy.penalty_per_error, False, list(self.history), metrics, logs
            )
        metrics[_stop(StopReason.PARSE_ERROR)] = 1.0
        self.done = True
        return MessageStepResult(policy.terminal_reward, True, list(self.history), metrics, logs)

    async def finish(
        self,
        stop: str,
        metrics: dict[str, float] | None = None,
        logs: dict[str, str | int | float] | None = None,
    ) -> MessageStepResult:
        """End the episode with `stop` and grade it (also called by AgentToolEnv's budgets)."""
        metrics = dict(metrics or {})
        metrics[_stop(stop)] = 1.0
        self.done = True
        reward, graded = await self.grade()
        reward = self.termination.final_reward(reward, stop)
        return MessageStepResult(
            reward, True, list(self.history), {**metrics, **graded}, logs or {}
        )

    async def grade(self) -> RewardResult:
        policy = self.termination
        messages = list(self.history)
        if not policy.grade_whole_conversation:
            messages = messages[len(self.initial_messages) :]
        try:
            async with asyncio.timeout(policy.grader_timeout_s):
                return await self.reward_fn(messages)
        except Exception:
            if policy.grader_failure_reward is None:
                raise
            return policy.grader_failure_reward, {"grader_failed": 1.0}


class AgentToolEnv(EnvFromMessageEnv):
    """EnvFromMessageEnv over an AgentToolMessageEnv, enforcing the budget's sampled tokens and
    wall time after each turn (a turn that spends the last of either ends and grades the
    episode, stop `max_sampled_tokens` / `rollout_timeout`)."""

    def __init__(self, renderer: RendererLike, agent: AgentToolMessageEnv, **adapter: Any) -> None:
        super().__init__(renderer, agent, **adapter)
        self.agent = agent
        self.sampled_tokens = 0
        self.started: float | None = None

    async def initial_observation(self) -> Any:
        self.started = time.monotonic()
        return await super().initial_observation()

    def _budget_stop(self) -> str | None:
        budget = self.agent.budget
        if (
            budget.max_sampled_tokens is not None
            and self.sampled_tokens >= budget.max_sampled_tokens
        ):
            return StopReason.MAX_SAMPLED_TOKENS
        wall = budget.max_wall_s
        if (
            wall is not None
            and self.started is not None
            and time.monotonic() - self.started >= wall
        ):
            return StopReason.ROLLOUT_TIMEOUT
        return None

    async def step(self, action: Action, *, extra: ActionExtra | None = None) -> StepResult:
        self.sampled_tokens += len(action)
        result = await super().step(action, extra=extra)
        stop = None if result.episode_done else self._budget_stop()
        if stop is None:
            return result
        final = await self.agent.finish(stop)
        return StepResult(
            reward=result.reward + final.reward,
            episode_done=True,
            next_observation=result.next_observation,
            next_stop_condition=result.next_stop_condition,
            metrics={**result.metrics, **final.metrics},
            logs=result.logs,
        )


def agent_tool_env(
    renderer: RendererLike,
    tools: Sequence[Tool],
    initial_messages: Sequence[Message],
    reward_fn: RewardFn,
    *,
    budget: ToolBudget = ToolBudget(),
    execution: ToolExecution = "parallel",
    failed_parse_reward: float = -0.1,
    terminate_on_parse_error: bool = True,
    parse_errors: ParseErrorPolicy | None = None,
    termination: TerminationPolicy = TerminationPolicy(),
    unknown_tool_errors: Callable[[CallError], str] = json_error,
    max_trajectory_tokens: int | None = None,
    max_generation_tokens: int | None = None,
    context_overflow_reward: float = -0.1,
    example_id: str | None = None,
) -> AgentToolEnv:
    """A token-level tool env (tinker-cookbook's `build_agent_tool_env`). `initial_messages` are
    used as given: build them with `tool_conversation` to declare the tools to the model."""
    agent = AgentToolMessageEnv(
        tools, initial_messages, reward_fn, budget, execution, failed_parse_reward,
        terminate_on_parse_error, parse_errors, termination, unknown_tool_errors, example_id,
    )  # fmt: skip
    return AgentToolEnv(
        renderer,
        agent,
        failed_parse_reward=failed_parse_reward,
        terminate_on_parse_error=terminate_on_parse_error,
        max_trajectory_tokens=max_trajectory_tokens,
        max_generation_tokens=max_generation_tokens,
        context_overflow_reward=context_overflow_reward,
    )
