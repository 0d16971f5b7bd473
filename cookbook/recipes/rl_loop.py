"""rl_loop: the minimal RL loop, as tinker-cookbook's rl_loop: sample with the current weights,
centre rewards per group, skip groups with no signal, one policy-gradient step; nothing else."""

from __future__ import annotations

from typing import Any, ClassVar

from cookbook.envs import RLEnvFields
from cookbook.recipes import SMOLLM2
from cookbook.recipes.env_rl import EnvRL
from kitchen.workflows.reinforcement import RLLoopConfig


class RLLoopRecipeConfig(RLLoopConfig, RLEnvFields):
    # groups_per_batch is rl_loop's batch_size; the flat loop evaluates nothing: no test problems.
    defaults: ClassVar[dict[str, Any]] = {
        "model_name": SMOLLM2,
        "arithmetic_max_operand": 10,
        "group_size": 8,
        "num_batches": 10,
        "learning_rate": 3e-4,
        "max_tokens": 10,
        "num_test_problems": 0,
    }


class RLLoop(EnvRL[RLLoopRecipeConfig]):
    """The flat RL loop: sample, centre rewards, train, log, save."""

    name = "rl_loop"
