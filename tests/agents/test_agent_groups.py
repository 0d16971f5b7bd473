"""train_core's agent groups on their own: addresses, budgets, short groups and the step's
failure line, with a gateway double that records what each rollout asked."""

from __future__ import annotations

import asyncio
from typing import Any

from train_core.agents import CallLog
from train_core.agents.rollouts import (
    AgentBudgets,
    AgentGroupBuilder,
    GroupOutcome,
    agent_metrics,
    do_agent_group_rollout,
    failure_line,
)
from train_core.rl.types import TrajectoryGroup


class Recorder:
    """A gateway double: the client is the address; `call` records one call under it."""

    def __init__(self) -> None:
        self.log, self.taken = CallLog(), []

    def client(self, address: str) -> Any:
        return self, address

    def take(self, address: str) -> list[Any]:
        self.taken.append(address)
        return self.log.take(address)

    def call(self, address: str, sampled: int) -> None:
        self.log.add(
            address,
            prompt_tokens=[1, 2],
            sampled_tokens=[3] * sampled,
            sampled_logprobs=[-1.0] * sampled,
            stop_reason="stop",
            sampler_version=0,
        )


async def _agent(client: Any, task: dict[str, Any]) -> float:
    gateway, address = client
    i = int(address.rsplit("-", 1)[1])
    behaviour = task.get(i, "ok")
    if behaviour == "hang":
        await asyncio.sleep(3600)
    for _ in range(3 if behaviour == "chatty" else 1):
        gateway.call(address, 9 if behaviour == "long" else 2)
    if behaviour == "raise":
        raise KeyError("no such tool")
    return float(i)


def _run(
    task: dict[int, str], budgets: AgentBudgets, size: int = 5
) -> tuple[GroupOutcome, Recorder]:
    gateway = Recorder()
    builder = AgentGroupBuilder(_agent, task, size, ("t",))
    return asyncio.run(do_agent_group_rollout(builder, gateway, "7-2", budgets)), gateway


def test_each_kind_of_failure_is_dropped_counted_and_its_records_taken() -> None:
    budgets = AgentBudgets(wall_time_s=0.2, max_turns=2, max_sampled_tokens=6)
    task = {0: "raise", 1: "hang", 2: "chatty", 3: "long"}
    outcome, gateway = _run(task, budgets)
    assert sorted(gateway.taken) == [f"7-2-{i}" for i in range(5)]  # every address taken once
    kinds = {f.address: f.kind for f in outcome.failures}
    assert kinds == {
        "7-2-0": "failed",
        "7-2-1": "timed_out",
        "7-2-2": "over_turns",
        "7-2-3": "over_sampled_tokens",
    }
    # one rollout left, under min_group_size 2: the group is dropped whole, its failures kept
    assert outcome.group is None and outcome.rollouts == 5
    assert agent_metrics([outcome])["agents/dropped_groups"] == 1.0


def test_the_rollouts_within_budget_train_with_their_own_rewards() -> None:
    outcome, _ = _run({1: "raise"}, AgentBudgets(), size=4)
    group = outcome.group
    assert isinstance(group, TrajectoryGroup)
    assert group.get_total_rewards() == [0.0, 2.0, 3.0]  # rollouts 0, 2, 3: reward = index
    assert [e.error_type for e in group.rollout_errors] == ["failed"]
    metrics = agent_metrics([outcome])
    assert (metrics["agents/calls"], metrics["agents/turns"], metrics["agents/failed"]) == (3, 1, 1)


def test_the_failure_line_names_the_first_error_only_past_the_fraction() -> None:
    outcome, _ = _run({1: "raise", 3: "raise"}, AgentBudgets(), size=4)
    assert failure_line([outcome], 0.5) is None  # 2 of 4 is not past one half
    line = failure_line([outcome], 0.25)
    assert line == (
        "2 of 4 agent rollouts dropped, over max_failed_fraction 0.25; "
        "first: 7-2-1: raised KeyError: 'no such tool'"
    )


def test_classic_groups_add_no_agent_metrics_and_never_fail_the_step() -> None:
    classic = GroupOutcome(TrajectoryGroup([], [], []), rollouts=4)
    assert agent_metrics([classic]) == {} and failure_line([classic], 0.0) is None
