"""Agent groups: `group_size` runs of an agent's own loop on one task, each with a client the
gateway records under its own address, turned into a TrajectoryGroup from those records.

An agent is an async function `rollout(client, task) -> reward` over an `openai.AsyncOpenAI`
client. A run that raises, outlives its wall-time budget (it is cancelled) or goes past its turn,
sampled-token or tool-call budget is dropped and counted, never trained on; a group with fewer than
`min_group_size` runs left is dropped whole (its advantages would centre on nothing). Whether the
step goes on is the caller's decision (`failure_line`), over all the step's groups.

`gateway` is duck-typed (the AgentGateway port: `client(address)`, `take(address)`) so this
module needs nothing outside train_core. A gateway that also has `limit(address, budgets) ->
RolloutMeter` (Kitchen's) enforces the turn, token and tool-call budgets while the rollout runs:
the call past one is refused (the agent's client raises) and the rollout dropped under that
budget's kind whether or not the agent caught the error. With a gateway without it, they are
checked from the records once the rollout ends, and tool calls counted on its client.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from train_core.agents.budgets import RolloutMeter
from train_core.agents.records import CallRecord
from train_core.agents.tool_calls import ToolCallCount
from train_core.agents.trajectories import count_splits, records_to_trajectory
from train_core.rl.types import RolloutError, Trajectory, TrajectoryGroup

AgentRollout: TypeAlias = Callable[[Any, Any], Awaitable[float]]
"""(an openai.AsyncOpenAI client, a task) -> the episode's reward."""

FailureKind = Literal[
    "failed", "timed_out", "over_turns", "over_sampled_tokens", "over_tool_calls", "no_calls"
]
FAILURE_KINDS: tuple[FailureKind, ...] = (
    "failed",
    "timed_out",
    "over_turns",
    "over_sampled_tokens",
    "over_tool_calls",
    "no_calls",
)


@dataclass(frozen=True)
class AgentGroupBuilder:
    """`group_size` rollouts of `rollout` on `task`: what an EnvGroupBuilder is to classic envs
    (the RL workflow tells them apart by this type)."""

    rollout: AgentRollout
    task: Any
    group_size: int
    tags: tuple[str, ...] = ()

    def logging_tags(self) -> list[str]:
        return list(self.tags)


@dataclass(frozen=True)
class AgentBudgets:
    """What one rollout may spend; None: no limit."""

    wall_time_s: float | None = None
    max_turns: int | None = None
    """Model calls per rollout."""
    max_sampled_tokens: int | None = None
    """Sampled tokens per rollout, over all its calls."""
    max_tool_calls: int | None = None
    """Tool calls in the replies one rollout received, over all its calls (chat completions,
    responses and messages, streamed or not)."""
    min_group_size: int = 2
    """Rollouts a group must keep to train; fewer left and the group is dropped."""


@dataclass(frozen=True)
class RolloutFailure:
    """A dropped rollout: where, why (a FailureKind), and the one line that says what happened."""

    address: str
    kind: FailureKind
    message: str

    def line(self) -> str:
        return f"{self.address}: {self.message}"


@dataclass
class GroupOutcome:
    """One group's result: its trajectories (None when dropped whole) and what was dropped.
    Classic env groups have no failures (their errors still fail the step) and no calls."""

    group: TrajectoryGroup | None
    rollouts: int
    failures: list[RolloutFailure] = field(default_factory=list)
    calls: int = 0
    splits: int = 0
    tool_calls: int = 0
    agent: bool = False


async def do_agent_group_rollout(
    builder: AgentGroupBuilder,
    gateway: Any,
    prefix: str,
    budgets: AgentBudgets,
    client_for: Callable[[str], Any] | None = None,
) -> GroupOutcome:
    """Run the group's rollouts concurrently, rollout i at address f"{prefix}-{i}" with the client
    `client_for(address)` (default: the gateway's in-process one), and build the trajectories of
    those that finished within budget from the gateway's records."""
    addresses = [f"{prefix}-{i}" for i in range(builder.group_size)]
    make_client = client_for or gateway.client
    results = await asyncio.gather(
        *(_one_rollout(builder, gateway, make_client, a, budgets) for a in addresses)
    )
    kept: list[tuple[Trajectory, int]] = []
    failures: list[RolloutFailure] = []
    calls = tool_calls = 0
    for result in results:
        if isinstance(result, RolloutFailure):
            failures.append(result)
            continue
        records, reward, n_tool_calls = result
        calls, tool_calls = calls + len(records), tool_calls + n_tool_calls
        kept.append((records_to_trajectory(records, reward), count_splits(records)))
    outcome = GroupOutcome(None, builder.group_size, failures, calls, 0, tool_calls, agent=True)
    if len(kept) < max(budgets.min_group_size, 1):
        return outcome
    outcome.splits = sum(splits for _, splits in kept)
    outcome.group = TrajectoryGroup(
        trajectories_G=[traj for traj, _ in kept],
        final_rewards_G=[0.0] * len(kept),
        metrics_G=[{} for _ in kept],
        rollout_errors=[RolloutError(f.kind, f.line()) for f in failures],
    )
    return outcome


async def _one_rollout(
    builder: AgentGroupBuilder,
    gateway: Any,
    make_client: Callable[[str], Any],
    address: str,
    budgets: AgentBudgets,
) -> tuple[list[CallRecord], float, int] | RolloutFailure:
    """(records, reward, tool calls) of a rollout within budget, else why it was dropped. Its
    records are taken from the gateway whatever happens, so none outlives the rollout there, and
    its client is closed. A budget the gateway refused a call for is the reason first: the
    agent's error (or its wall-time cancel, if it went on) followed from it."""
    limit = getattr(gateway, "limit", None)
    meter: RolloutMeter | None = limit(address, budgets) if limit is not None else None
    timer = asyncio.timeout(budgets.wall_time_s)
    counted = ToolCallCount()
    client = make_client(address)
    if meter is None:  # the gateway does not count them: the client does
        client = counted.attach(client)
    failure: RolloutFailure | None = None
    reward = 0.0
    try:
        try:
            async with timer:
                reward = float(await builder.rollout(client, builder.task))
        except Exception as e:
            if timer.expired():  # not the agent's own TimeoutError: the budget's cancel
                failure = RolloutFailure(
                    address,
                    "timed_out",
                    f"cancelled at its wall-time budget of {budgets.wall_time_s} s",
                )
            else:
                failure = RolloutFailure(address, "failed", f"raised {_one_line(e)}")
    finally:
        records = gateway.take(address)
        close = getattr(client, "close", None)
        if close is not None:
            await asyncio.shield(close())
    if meter is not None and meter.refusal is not None:
        return RolloutFailure(address, meter.refusal.kind, meter.refusal.message)
    if failure is not None:
        return failure
    tool_calls = meter.tool_calls if meter is not None else counted.n
    return over_budget(address, records, budgets, tool_calls) or (records, reward, tool_calls)


def over_budget(
    address: str, records: Sequence[CallRecord], budgets: AgentBudgets, tool_calls: int = 0
) -> RolloutFailure | None:
    """Why a finished rollout's calls break its budget (turns, sampled tokens, then tool calls),
    if they do."""
    if not records:
        return RolloutFailure(address, "no_calls", "made no model calls: nothing to train on")
    if budgets.max_turns is not None and len(records) > budgets.max_turns:
        return RolloutFailure(
            address, "over_turns", f"made {len(records)} calls, over max_turns {budgets.max_turns}"
        )
    sampled = sum(len(r.sampled_tokens) for r in records)
    if budgets.max_sampled_tokens is not None and sampled > budgets.max_sampled_tokens:
        return RolloutFailure(
            address,
            "over_sampled_tokens",
            f"sampled {sampled} tokens, over max_sampled_tokens {budgets.max_sampled_tokens}",
        )
    if budgets.max_tool_calls is not None and tool_calls > budgets.max_tool_calls:
        return RolloutFailure(
            address,
            "over_tool_calls",
            f"made {tool_calls} tool calls, over max_tool_calls {budgets.max_tool_calls}",
        )
    return None


def _one_line(error: BaseException) -> str:
    text = " ".join(str(error).split())
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def agent_metrics(outcomes: Sequence[GroupOutcome]) -> dict[str, float]:
    """`agents/*` of a step's agent groups (none for classic envs, so their logs stay as they
    were): rollouts run, dropped by kind, groups dropped, calls, turns per kept rollout, splits."""
    agent = [o for o in outcomes if o.agent]
    if not agent:
        return {}
    kinds = Counter(f.kind for o in agent for f in o.failures)
    kept = sum(len(o.group.trajectories_G) for o in agent if o.group is not None)
    calls = sum(o.calls for o in agent if o.group is not None)
    out: dict[str, float] = {
        "agents/rollouts": float(sum(o.rollouts for o in agent)),
        "agents/dropped": float(sum(kinds.values())),
        **{f"agents/{kind}": float(kinds[kind]) for kind in FAILURE_KINDS},
        "agents/dropped_groups": float(sum(1 for o in agent if o.group is None)),
        "agents/calls": float(calls),
        "agents/turns": calls / kept if kept else 0.0,
        "agents/tool_calls": float(sum(o.tool_calls for o in agent if o.group is not None)),
        "agents/splits": float(sum(o.splits for o in agent)),
    }
    return out


def failure_line(outcomes: Sequence[GroupOutcome], max_failed_fraction: float) -> str | None:
    """The one line a step fails with when more than `max_failed_fraction` of its agent rollouts
    were dropped (raised, timed out, over budget), naming the first; None while within it."""
    rollouts = sum(o.rollouts for o in outcomes if o.agent)
    failures = [f for o in outcomes for f in o.failures]
    if not rollouts or len(failures) / rollouts <= max_failed_fraction:
        return None
    return (
        f"{len(failures)} of {rollouts} agent rollouts dropped, over max_failed_fraction "
        f"{max_failed_fraction}; first: {failures[0].line()}"
    )
