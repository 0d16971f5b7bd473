"""rl_basic: policy-gradient RL on a verifiable task, as tinker-cookbook's rl_basic.

Locally: SmolLM2-135M-Instruct learns small additions (the reward rises within minutes on CPU).
`--preset cookbook`: tinker-cookbook's run, GSM8K on Qwen3.5-9B-Base through Tinker.
"""

from __future__ import annotations

from typing import Any, ClassVar

from cookbook.envs import RLEnvFields
from cookbook.recipes import SMOLLM2
from cookbook.recipes.env_rl import EnvRL
from kitchen.workflows.reinforcement import RLConfig


class RLBasicConfig(RLConfig, RLEnvFields):
    defaults: ClassVar[dict[str, Any]] = {
        "model_name": SMOLLM2,
        "arithmetic_max_operand": 10,
        "group_size": 8,
        "num_batches": 12,
        "learning_rate": 3e-4,
        "max_tokens": 10,  # room for '10 + 8 = 18' and the stop
        "remove_constant_reward_groups": True,
        "eval_every": 0,
    }


class RLBasic(EnvRL[RLBasicConfig]):
    """RL on a verifiable task (arithmetic locally, GSM8K in the cookbook preset)."""

    name = "rl_basic"
