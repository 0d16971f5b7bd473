"""The RL seam on the fake backend, with a gateway double: agent groups train on exactly the
gateway's records in every RL mode, a 2-turn episode is one datum, and dropped rollouts are
counted, cancelled at their wall-time budget, or fail the step past the configured fraction."""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from typing import Any

import pytest

from cookbook.recipes.agent_rl import AgentRL, AgentRLRecipeConfig
from kitchen.adapters.fake import FakeBackend
from kitchen.adapters.fake.backend import FakeTrainingClient
from kitchen.app.launch import run
from kitchen.engine.errors import StageError
from kitchen.engine.recipe import Recipe
from kitchen.workflows.reinforcement import reinforcement
from tests.agents.gateway_double import GatewayDouble
from tests.agents.helpers import episode_datum, trained_datum
from tests.helpers import record_forward_backward, sent_datums
from train_core.agents.dataset import AgentTasks


class RecordingGateway(GatewayDouble):
    """The double, keeping a copy of every address's records as the seam takes them."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.taken: dict[str, list[Any]] = {}

    def take(self, address: str) -> list[Any]:
        records = super().take(address)
        self.taken[address] = records
        return records


def _config(**overrides: Any) -> AgentRLRecipeConfig:
    values = {
        "model_name": "kitchen/tiny-llama",
        "group_size": 4,
        "groups_per_batch": 2,
        "num_batches": 2,
        "max_tokens": 6,
        "save_every": 0,
        "register_model": False,
        **overrides,
    }
    return AgentRLRecipeConfig(**values)


@pytest.mark.parametrize("mode", ["sync", "streaming", "async"])
def test_the_trained_datums_are_the_gateways_records_and_each_episode_one_datum(
    monkeypatch: Any, mode: str
) -> None:
    calls = record_forward_backward(monkeypatch, FakeTrainingClient)
    gateway = RecordingGateway()
    result = run(AgentRL(), _config(mode=mode), backend=FakeBackend(), ports={"agents": gateway})
    assert result.steps == 2
    assert len(gateway.taken) == 2 * 2 * 4  # steps x groups x rollouts, one address each
    assert all(re.fullmatch(r"[01]-[01]-[0-3]", a) for a in gateway.taken)
    for records in gateway.taken.values():
        assert len(records) == 2 and records[1].extends_previous  # two turns, extended
    expected = Counter(map(episode_datum, gateway.taken.values()))
    trained = Counter(map(trained_datum, sent_datums(calls)))
    assert trained == expected  # one datum per episode, exact
    assert gateway.versions_set[:2] == [0, 1]  # the policy swapped to each step's weights
    steps = [m for m in result.metrics if "agents/calls" in m]
    assert [m["agents/calls"] for m in steps] == [16.0, 16.0]
    assert all(m["agents/turns"] == 2.0 and m["agents/splits"] == 0.0 for m in steps)


class FlakyAgents(Recipe[AgentRLRecipeConfig]):
    """Tasks q0, q1, ... in groups of the config's shape; `agent` is the rollout function."""

    name = "flaky_agents"

    def __init__(self, agent: Any) -> None:
        self.agent = agent

    def workflow(self, cfg: AgentRLRecipeConfig) -> Any:
        def make(ctx: Any) -> Any:
            n = (cfg.num_batches or 1) * cfg.groups_per_batch
            tasks = [{"question": f"q{i}"} for i in range(n)]
            return AgentTasks(self.agent, tasks, cfg.groups_per_batch, cfg.group_size), None

        return reinforcement(cfg, make, self.name)


def _ask(client: Any, content: str) -> Any:
    return client.chat.completions.create(
        model="policy", messages=[{"role": "user", "content": content}], max_tokens=4
    )


def _raising_on(calls: set[int]) -> Any:
    count = [0]

    async def agent(client: Any, task: Any) -> float:
        i, count[0] = count[0], count[0] + 1
        await _ask(client, task["question"])
        if i in calls:
            raise ValueError(f"boom\nat rollout {i}")
        return float(i % 2)

    return agent


def test_an_agent_that_raises_in_one_of_eight_rollouts_trains_on_the_other_seven(
    monkeypatch: Any,
) -> None:
    calls = record_forward_backward(monkeypatch, FakeTrainingClient)
    cfg = _config(group_size=8, groups_per_batch=1, num_batches=1)
    result = run(
        FlakyAgents(_raising_on({3})), cfg, backend=FakeBackend(), ports={"agents": GatewayDouble()}
    )
    (step,) = [m for m in result.metrics if "agents/failed" in m]
    assert (step["agents/rollouts"], step["agents/failed"], step["agents/dropped"]) == (8, 1, 1)
    assert len(sent_datums(calls)) == 7 and step["num_datums"] == 7


def test_a_hung_agent_is_cancelled_at_its_wall_time_budget(monkeypatch: Any) -> None:
    calls = record_forward_backward(monkeypatch, FakeTrainingClient)
    cancelled: list[int] = []
    count = [0]

    async def agent(client: Any, task: Any) -> float:
        i, count[0] = count[0], count[0] + 1
        await _ask(client, task["question"])
        if i == 0:
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                cancelled.append(i)
                raise
        return float(i % 2)

    cfg = _config(group_size=4, groups_per_batch=1, num_batches=1, agent_wall_time_s=0.5)
    result = run(FlakyAgents(agent), cfg, backend=FakeBackend(), ports={"agents": GatewayDouble()})
    (step,) = [m for m in result.metrics if "agents/timed_out" in m]
    assert cancelled == [0] and step["agents/timed_out"] == 1 and step["agents/failed"] == 0
    assert len(sent_datums(calls)) == 3
    assert step["time/rollouts"] < 30  # cancelled at 0.5 s, never the hour


def test_past_the_failed_fraction_the_step_fails_with_one_line_naming_the_first_error() -> None:
    cfg = _config(group_size=8, groups_per_batch=1, num_batches=1, agent_max_failed_fraction=0.5)
    with pytest.raises(StageError) as raised:
        run(
            FlakyAgents(_raising_on({1, 2, 4, 6, 7})),
            cfg,
            backend=FakeBackend(),
            ports={"agents": GatewayDouble()},
        )
    message = str(raised.value)
    assert "\n" not in message
    assert re.search(
        r"5 of 8 agent rollouts dropped, over max_failed_fraction 0.5; "
        r"first: 0-0-\d: raised ValueError: boom at rollout \d",
        message,
    ), message


def test_budgets_on_turns_and_sampled_tokens_drop_rollouts_and_their_short_groups() -> None:
    calls = {"q0": 3, "q1": 2, "q2": 1}  # 4 tokens a call (max_tokens 4)

    async def agent(client: Any, task: Any) -> float:
        for _ in range(calls[task["question"]]):
            await _ask(client, "again")
        return 0.0

    cfg = _config(
        group_size=2,
        groups_per_batch=3,
        num_batches=1,
        agent_max_turns=2,
        agent_max_sampled_tokens=6,
        agent_max_failed_fraction=0.7,
    )
    result = run(FlakyAgents(agent), cfg, backend=FakeBackend(), ports={"agents": GatewayDouble()})
    (step,) = [m for m in result.metrics if "agents/over_turns" in m]
    assert step["agents/over_turns"] == 2 and step["agents/over_sampled_tokens"] == 2
    assert step["agents/dropped_groups"] == 2 and step["num_groups_trained"] == 1


@pytest.mark.parametrize("mode", ["sync", "streaming", "async"])
def test_a_group_left_with_too_few_rollouts_is_dropped_and_the_run_goes_on(mode: str) -> None:
    async def agent(client: Any, task: Any) -> float:
        reply = await _ask(client, task["question"])
        if task["question"] == "q0":  # the first group fails whole
            raise RuntimeError("tool crashed")
        return float(len(reply.choices[0].message.content or "") % 2)

    cfg = _config(group_size=2, groups_per_batch=2, num_batches=2, mode=mode)
    result = run(FlakyAgents(agent), cfg, backend=FakeBackend(), ports={"agents": GatewayDouble()})
    assert result.steps == 2
    steps = [m for m in result.metrics if "agents/dropped_groups" in m]
    assert sum(m["agents/failed"] for m in steps) == 2
    assert sum(m["agents/dropped_groups"] for m in steps) == 1
    # the other three groups train, 2 rollouts each (async: whichever step takes them)
    assert (
        sum(m["env/all/total_episodes"] for m in result.metrics if "env/all/total_episodes" in m)
        == 6
    )


def test_a_rollout_over_its_tool_call_budget_is_dropped_and_tool_calls_are_counted() -> None:
    calls = {"q0": 2, "q1": 1}  # requests each answered with one tool call

    async def agent(client: Any, task: Any) -> float:
        for _ in range(calls[task["question"]]):
            reply = await _ask(client, "use the tool")
            assert reply.choices[0].message.tool_calls
        return 0.0

    cfg = _config(group_size=2, groups_per_batch=2, num_batches=1, agent_max_tool_calls=1)
    gateway = GatewayDouble(tool_on="use the tool")
    result = run(FlakyAgents(agent), cfg, backend=FakeBackend(), ports={"agents": gateway})
    (step,) = [m for m in result.metrics if "agents/over_tool_calls" in m]
    assert step["agents/over_tool_calls"] == 2 and step["agents/dropped_groups"] == 1
    assert step["agents/tool_calls"] == 2  # q1's two rollouts, one each
