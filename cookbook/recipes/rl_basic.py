"""rl_basic: policy-gradient RL on a verifiable task, as tinker-cookbook's rl_basic.

Locally: SmolLM2-135M-Instruct learns small additions (the reward rises within minutes on CPU).
`--preset cookbook`: tinker-cookbook's run, GSM8K on Qwen3.5-9B-Base through Tinker.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field

from cookbook.envs import RLEnvFields, env_dataset
from kitchen.engine.graph import Workflow
from kitchen.engine.recipe import Recipe
from kitchen.workflows.reinforcement import RLConfig, reinforcement
from kitchen.workflows.reinforcement.state import RLState


class RLBasicConfig(RLConfig, RLEnvFields):
    model_name: str = Field(
        "HuggingFaceTB/SmolLM2-135M-Instruct", description="Base model to train"
    )
    arithmetic_max_operand: int = Field(
        10, ge=1, description="arithmetic: operands drawn from 0..N (the difficulty knob)"
    )
    group_size: int = Field(8, ge=1, description="Rollouts per problem (GRPO group)")
    groups_per_batch: int = Field(8, ge=1, description="Problems (groups) per training batch")
    num_batches: int | None = Field(
        12, ge=1, description="Training iterations; default: every batch of the env dataset"
    )
    learning_rate: float = Field(3e-4, gt=0, description="Adam learning rate")
    max_tokens: int = Field(
        10, ge=1, description="Max sampled tokens per turn (room for '10 + 8 = 18' and the stop)"
    )
    remove_constant_reward_groups: bool = Field(
        True, description="Train only on groups whose rewards differ (the rest carry no signal)"
    )
    eval_every: int = Field(
        0, ge=0, description="Evaluate on held-out problems every N steps (0 = never)"
    )
    save_every: int = Field(
        20, ge=0, description="Save a resumable checkpoint every N steps (0 = never)"
    )


class RLBasic(Recipe[RLBasicConfig]):
    """RL on a verifiable task (arithmetic locally, GSM8K in the cookbook preset)."""

    name = "rl_basic"
    Config = RLBasicConfig
    presets: ClassVar[dict[str, dict[str, Any]]] = {
        "cookbook": {
            "model_name": "Qwen/Qwen3.5-9B-Base",
            "backend": "tinker",
            "env": "gsm8k",
            "groups_per_batch": 128,
            "group_size": 16,
            "num_batches": None,
            "learning_rate": 4e-5,
            "max_tokens": 256,
            "eval_every": 0,
            "save_every": 20,
            "lora_rank": 32,
            "loss_fn": "importance_sampling",
            "temperature": 1.0,
            "remove_constant_reward_groups": False,
        }
    }

    def workflow(self, cfg: RLBasicConfig) -> Workflow[RLState]:
        make = env_dataset(cfg, cfg.groups_per_batch, cfg.group_size, cfg.num_batches, cfg.seed)
        return reinforcement(cfg, make, self.name)
