"""math_rl: RL on math word problems (GSM8K-style, \\boxed{} answers) or arithmetic, with every
option of tinker-cookbook's math_rl CLI: loss, KL penalty, substeps, streaming and async modes."""

from __future__ import annotations

from typing import Any, ClassVar

from cookbook.envs import RLEnvFields
from cookbook.recipes import SMOLLM2
from cookbook.recipes.env_rl import EnvRL
from kitchen.workflows.reinforcement import RLConfig


class MathRLConfig(RLConfig, RLEnvFields):
    defaults: ClassVar[dict[str, Any]] = {
        "model_name": SMOLLM2,
        "env": "math",
        "group_size": 4,
        "groups_per_batch": 4,
        "num_batches": 10,
        "learning_rate": 1e-4,
        "max_tokens": 96,
        "num_test_problems": 8,
        "eval_every": 5,
    }


class MathRL(EnvRL[MathRLConfig]):
    """RL on GSM8K-style math (bundled, or openai/gsm8k) or arithmetic; sync, streaming or async."""

    name = "math_rl"
