"""rl_loop: the minimal RL loop, as tinker-cookbook's rl_loop: sample with the current weights,
centre rewards per group, skip groups with no signal, one policy-gradient step; nothing else."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field

from cookbook.envs import RLEnvFields, env_dataset
from kitchen.engine.graph import Workflow
from kitchen.engine.recipe import Recipe
from kitchen.workflows.reinforcement import RLLoopConfig, reinforcement
from kitchen.workflows.reinforcement.state import RLState


class RLLoopRecipeConfig(RLLoopConfig, RLEnvFields):
    model_name: str = Field(
        "HuggingFaceTB/SmolLM2-135M-Instruct", description="Base model to train"
    )
    arithmetic_max_operand: int = Field(
        10, ge=1, description="arithmetic: operands drawn from 0..N (the difficulty knob)"
    )
    group_size: int = Field(8, ge=1, description="Rollouts per problem (GRPO group)")
    groups_per_batch: int = Field(8, ge=1, description="Problems per batch (rl_loop's batch_size)")
    num_batches: int | None = Field(
        10, ge=1, description="Training iterations; default: every batch of the env dataset"
    )
    learning_rate: float = Field(3e-4, gt=0, description="Adam learning rate")
    max_tokens: int = Field(10, ge=1, description="Max sampled tokens per turn")
    num_test_problems: int = Field(0, ge=0, description="Unused: rl_loop does not evaluate")
    save_every: int = Field(
        20, ge=0, description="Save a resumable checkpoint every N steps (0 = never)"
    )


class RLLoop(Recipe[RLLoopRecipeConfig]):
    """The flat RL loop: sample, centre rewards, train, log, save."""

    name = "rl_loop"
    Config = RLLoopRecipeConfig
    presets: ClassVar[dict[str, dict[str, Any]]] = {
        # tinker-cookbook's rl_loop Config (batch_size -> groups_per_batch). Its loss default is
        # stable_reinforce, which needs Tinker's sampler stability records; importance_sampling here.
        "cookbook": {
            "model_name": "Qwen/Qwen3.5-9B-Base",
            "backend": "tinker",
            "env": "gsm8k",
            "groups_per_batch": 128,
            "group_size": 16,
            "num_batches": None,
            "learning_rate": 4e-5,
            "lora_rank": 32,
            "save_every": 20,
            "max_tokens": 256,
            "loss_fn": "importance_sampling",
        }
    }

    def workflow(self, cfg: RLLoopRecipeConfig) -> Workflow[RLState]:
        make = env_dataset(cfg, cfg.groups_per_batch, cfg.group_size, cfg.num_batches, cfg.seed)
        return reinforcement(cfg, make, self.name)
