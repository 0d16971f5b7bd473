"""math_rl: RL on math word problems (GSM8K-style, \\boxed{} answers) or arithmetic, with every
option of tinker-cookbook's math_rl CLI: loss, KL penalty, substeps, streaming and async modes."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field

from cookbook.envs import EnvName, RLEnvFields, env_dataset
from kitchen.engine.graph import Workflow
from kitchen.engine.recipe import Recipe
from kitchen.workflows.reinforcement import RLConfig, reinforcement
from kitchen.workflows.reinforcement.state import RLState


class MathRLConfig(RLConfig, RLEnvFields):
    model_name: str = Field(
        "HuggingFaceTB/SmolLM2-135M-Instruct", description="Base model to train"
    )
    env: EnvName = Field(
        "math",
        description="arithmetic | math (GSM8K-style rows of `dataset`) | gsm8k (openai/gsm8k) | guess_number",
    )
    group_size: int = Field(4, ge=1, description="Rollouts per problem (GRPO group)")
    groups_per_batch: int = Field(4, ge=1, description="Problems (groups) per training batch")
    num_batches: int | None = Field(
        10, ge=1, description="Training iterations; default: every batch of the env dataset"
    )
    learning_rate: float = Field(1e-4, gt=0, description="Adam learning rate")
    max_tokens: int = Field(96, ge=1, description="Max sampled tokens per turn")
    num_test_problems: int = Field(
        8, ge=0, description="Held-out problems evaluated every eval_every steps (0 = none)"
    )
    eval_every: int = Field(
        5, ge=0, description="Evaluate on held-out problems every N steps (0 = never)"
    )
    save_every: int = Field(
        20, ge=0, description="Save a resumable checkpoint every N steps (0 = never)"
    )


class MathRL(Recipe[MathRLConfig]):
    """RL on GSM8K-style math (bundled, or openai/gsm8k) or arithmetic; sync, streaming or async."""

    name = "math_rl"
    Config = MathRLConfig
    presets: ClassVar[dict[str, dict[str, Any]]] = {
        # tinker-cookbook's math_rl CLIConfig defaults. Its loss default is stable_reinforce, which
        # needs Tinker's sampler stability records; this port uses importance_sampling.
        "cookbook": {
            "model_name": "Qwen/Qwen3.5-9B",
            "backend": "tinker",
            "env": "arithmetic",
            "arithmetic_max_operand": 100,
            "include_fewshot": True,
            "num_test_problems": 0,
            "lora_rank": 32,
            "group_size": 4,
            "groups_per_batch": 100,
            "num_batches": 100,
            "learning_rate": 1e-5,
            "max_tokens": 5,
            "temperature": 1.0,
            "kl_penalty_coef": 0.0,
            "num_substeps": 1,
            "eval_every": 20,
            "save_every": 20,
            "loss_fn": "importance_sampling",
        }
    }

    def workflow(self, cfg: MathRLConfig) -> Workflow[RLState]:
        make = env_dataset(cfg, cfg.groups_per_batch, cfg.group_size, cfg.num_batches, cfg.seed)
        return reinforcement(cfg, make, self.name)
