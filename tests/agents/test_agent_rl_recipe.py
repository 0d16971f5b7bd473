"""The agent_rl recipe: its plan in each mode, its calculator tool, and 2 steps on the tiny model
on the local engine, the agent's calls through a gateway."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from typer.testing import CliRunner

from cookbook.envs.calculator_agent import calculate, calculator_agent, calculator_tasks
from kitchen.app.cli import app
from kitchen.app.launch import run
from tests.agents.gateway_double import GatewayDouble
from tests.helpers import TWO_TINY_RL_STEPS, local_engine_ready

runner = CliRunner()


@pytest.mark.parametrize("mode", ["sync", "streaming", "async"])
def test_dry_run_prints_the_plan_with_the_policy_swap(mode: str) -> None:
    result = runner.invoke(
        app,
        ["run", "agent_rl", "--backend", "fake", "--dry-run", f"mode={mode}"],
        terminal_width=200,
    )
    assert result.exit_code == 0, result.output
    assert "config valid" in result.output and "set_agent_policy" in result.output


def test_bad_agent_budgets_exit_2_naming_the_flag() -> None:
    result = runner.invoke(
        app, ["run", "agent_rl", "--dry-run", "agent_min_group_size=9", "group_size=4"]
    )
    assert result.exit_code == 2
    assert "agent_min_group_size 9 is above group_size 4" in result.output
    negative = runner.invoke(app, ["run", "agent_rl", "--dry-run", "agent_wall_time_s=-1"])
    assert negative.exit_code == 2 and "agent-wall-time-s" in negative.output


def test_the_calculator_evaluates_integer_expressions_and_refuses_the_rest() -> None:
    assert calculate("23 * 4 + 7") == "99"
    assert calculate(" -(2 - 5) * 3 ") == "9"
    assert calculate("__import__('os')").startswith("error:")
    assert calculate("2 ** 99999").startswith("error:")
    assert calculate("").startswith("error:")


def test_tasks_are_a_function_of_the_seed() -> None:
    assert calculator_tasks(4, 12, seed=1) == calculator_tasks(4, 12, seed=1)
    assert calculator_tasks(4, 12, seed=1) != calculator_tasks(4, 12, seed=2)
    task = calculator_tasks(1, 12, seed=0)[0]
    a, b, c = (
        int(x) for x in task["question"].removeprefix("What is ").rstrip("?").split(" ")[::2]
    )
    assert task["answer"] == a * b + c


class _Answers:
    """A client whose replies are fixed: a tool call, then `final`."""

    def __init__(self, final: str) -> None:
        self.final, self.seen = final, []
        self.chat = self
        self.completions = self

    async def create(self, **request: Any) -> Any:
        from openai.types.chat import ChatCompletion

        self.seen.append(request)
        tool_call = {
            "id": "call_1",
            "type": "function",
            "function": {"name": "calculator", "arguments": '{"expression": "3 * 4 + 5"}'},
        }
        message = (
            {"role": "assistant", "content": None, "tool_calls": [tool_call]}
            if len(self.seen) == 1
            else {"role": "assistant", "content": self.final}
        )
        return ChatCompletion.model_validate(
            {
                "id": "x",
                "object": "chat.completion",
                "created": 0,
                "model": "policy",
                "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            }
        )


def test_the_agent_sends_the_tool_result_and_is_rewarded_for_the_right_answer() -> None:
    task = {"question": "What is 3 * 4 + 5?", "answer": 17}
    right, wrong = _Answers("It is 17."), _Answers("16")
    assert asyncio.run(calculator_agent(right, task)) == 1.0
    assert asyncio.run(calculator_agent(wrong, task)) == 0.0
    second = right.seen[1]["messages"]
    assert second[-1] == {"role": "tool", "tool_call_id": "call_1", "content": "17"}
    assert second[-2]["tool_calls"][0]["id"] == "call_1"
    assert right.seen[0]["tools"] == right.seen[1]["tools"]  # the same tools: the prompt extends


@pytest.mark.skipif(not local_engine_ready(), reason="local engine not available")
@pytest.mark.slow
def test_two_steps_on_the_tiny_model_train_on_policy_from_the_records(tmp_path: Any) -> None:
    gateway = GatewayDouble()
    result = run(
        "agent_rl", TWO_TINY_RL_STEPS, backend="local", log_dir=tmp_path, ports={"agents": gateway}
    )
    assert result.steps == 2
    steps = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    trained = [m for m in steps if "optim/kl_sample_train_v1" in m]
    assert len(trained) == 2
    # the recorded logprobs are the learner's own on the sampled tokens: sampler and trainer agree
    assert abs(trained[0]["optim/kl_sample_train_v1"]) < 1e-3
    assert all(m["agents/turns"] == 2.0 and m["num_datums"] == 4 for m in trained)
    assert gateway.versions_set == [0, 1]
