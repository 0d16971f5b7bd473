"""An OpenAI Agents SDK agent with a function tool, trained by Kitchen's RL through the gateway.

    python examples/agents_sdk_rl.py                  # local engine, tiny model, 2 iterations
    python examples/agents_sdk_rl.py --backend fake   # no model at all
    kitchen graph examples/agents_sdk_rl.py           # print the plan without running it

The agent is the SDK's own: an `Agent` with instructions, a `@function_tool` calculator and an
`OpenAIChatCompletionsModel` named `policy` on the client each rollout is handed, run by
`Runner.run`. Kitchen changes nothing in it: the rollout function builds the agent on the client,
runs it on the task and returns its reward. Every call the SDK makes goes through the run's agent
gateway, which records its exact tokens; the RL step trains on those records.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

from agents import (
    Agent,
    ModelSettings,
    OpenAIChatCompletionsModel,
    Runner,
    function_tool,
    set_tracing_disabled,
)

import kitchen
from cookbook.envs.arithmetic import extract_final_int
from cookbook.envs.calculator_agent import calculate, calculator_tasks
from kitchen import Workflow
from kitchen.workflows.reinforcement import reinforcement
from kitchen.workflows.reinforcement.config import AgentRLConfig
from kitchen.workflows.reinforcement.state import RLState
from train_core.agents.dataset import AgentTasks
from train_core.rl.types import RLEnvContext

set_tracing_disabled(True)  # the SDK's traces would go to OpenAI's servers


@function_tool
def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression of integers with + - * and parentheses."""
    return calculate(expression)


async def sdk_agent(client: Any, task: dict[str, Any]) -> float:
    """One episode: the SDK runs the agent on the question; 1.0 if its final answer is right."""
    agent = Agent(
        name="calculator",
        instructions="Use the calculator tool, then answer with the number only.",
        tools=[calculator],
        model=OpenAIChatCompletionsModel(model="policy", openai_client=client),
        model_settings=ModelSettings(max_tokens=128, temperature=1.0),
    )
    result = await Runner.run(agent, str(task["question"]), max_turns=3)
    return 1.0 if extract_final_int(str(result.final_output)) == task["answer"] else 0.0


@dataclass(frozen=True)
class SDKAgentTasks:
    """The dataset factory: `n_batches` batches of `groups_per_batch` tasks, `group_size`
    rollouts of sdk_agent each."""

    groups_per_batch: int
    group_size: int
    n_batches: int

    def __call__(self, ctx: RLEnvContext) -> tuple[AgentTasks, None]:
        tasks = calculator_tasks(self.groups_per_batch * self.n_batches, 12, seed=0)
        return AgentTasks(sdk_agent, tasks, self.groups_per_batch, self.group_size), None


def config() -> AgentRLConfig:
    """Sized for a CPU minute: 2 iterations of 2 tasks x 2 rollouts."""
    return AgentRLConfig.model_validate(
        {
            "model_name": "kitchen/tiny-llama",
            "lora_rank": 8,
            "learning_rate": 1e-3,
            "group_size": 2,
            "groups_per_batch": 2,
            "num_batches": 2,
            "eval_every": 0,
            "save_every": 0,
            "register_model": False,  # a toy: keep it out of your model registry
        }
    )


def build_workflow() -> Workflow[RLState]:
    cfg = config()
    return reinforcement(cfg, SDKAgentTasks(cfg.groups_per_batch, cfg.group_size, 2))


def main(argv: list[str] | None = None) -> kitchen.RunResult:
    parser = argparse.ArgumentParser(description="RL of an OpenAI Agents SDK agent")
    parser.add_argument("--backend", default="local", help="local | fake | tinker")
    parser.add_argument("--log-dir", default="runs/examples/agents_sdk_rl", help="run directory")
    args = parser.parse_args(argv)
    result = kitchen.run_workflow(
        build_workflow(), backend=args.backend, log_dir=args.log_dir, if_exists="delete"
    )
    for record in result.metrics:
        if "agents/calls" in record:
            print(
                f"step {record['step']}: reward {record['env/all/reward/total']:.3f}, "
                f"{record['agents/calls']:.0f} calls, {record['num_datums']} datums"
            )
    return result


if __name__ == "__main__":
    main()
