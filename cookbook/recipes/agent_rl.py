"""agent_rl: RL of an agent program with a tool, through the run's agent gateway.

The agent (cookbook/envs/calculator_agent.py) is a plain async function on an `openai.AsyncOpenAI`
client: it asks the policy, runs a calculator on the tool call, and answers. Every call goes
through the gateway, which records the exact tokens and logprobs; each episode trains as one
datum where its second prompt extends the first. Sized for the embedded engine: SmolLM2-135M,
4 tasks of 4 rollouts per step.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field

from cookbook.envs.calculator_agent import CalculatorAgentTasks
from cookbook.envs.synthetic import SYNTHETIC_BATCHES
from cookbook.recipes import SMOLLM2_RL
from cookbook.recipes.env_rl import EnvRL
from kitchen.workflows.reinforcement.config import AgentRLConfig
from train_core.rl.types import RLDatasetFactory


class AgentRLRecipeConfig(AgentRLConfig):
    defaults: ClassVar[dict[str, Any]] = {
        **SMOLLM2_RL,
        "max_tokens": 32,
    }

    max_operand: int = Field(
        12, ge=1, description="Operands of the 'a * b + c' tasks are drawn from 0..N"
    )


class AgentRL(EnvRL[AgentRLRecipeConfig]):
    """RL of a tool-calling agent on an OpenAI client, trained token for token."""

    name = "agent_rl"

    def envs(self, cfg: AgentRLRecipeConfig) -> RLDatasetFactory:
        return CalculatorAgentTasks(
            cfg.groups_per_batch,
            cfg.group_size,
            cfg.num_batches or SYNTHETIC_BATCHES,
            cfg.max_operand,
            seed=cfg.seed,
            max_tokens=cfg.max_tokens,
            temperature=cfg.temperature,
        )
