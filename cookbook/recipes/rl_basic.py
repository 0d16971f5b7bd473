"""rl_basic: policy-gradient RL on a verifiable task, as tinker-cookbook's rl_basic.

Locally: SmolLM2-135M-Instruct learns small additions (the reward rises within minutes on CPU).
`--preset cookbook`: tinker-cookbook's run, GSM8K on Qwen3.5-9B-Base through Tinker.
"""

from __future__ import annotations

from typing import Any, ClassVar, TypeVar

from cookbook.envs import RLEnvFields, env_dataset
from cookbook.recipes import SMOLLM2
from kitchen.engine.graph import Workflow
from kitchen.engine.recipe import Recipe
from kitchen.workflows.reinforcement import RLConfig, RLLoopConfig, reinforcement
from kitchen.workflows.reinforcement.state import RLState


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


E = TypeVar("E", bound=RLLoopConfig)


class EnvRL(Recipe[E]):
    """A recipe that runs the reinforcement workflow on its config's env (RLEnvFields): rl_basic,
    math_rl and rl_loop differ only in their configs."""

    def workflow(self, cfg: E) -> Workflow[RLState]:
        if not isinstance(cfg, RLEnvFields):
            raise TypeError(f"recipe {self.name}: its Config must mix in RLEnvFields")
        make = env_dataset(cfg, cfg.groups_per_batch, cfg.group_size, cfg.num_batches, cfg.seed)
        return reinforcement(cfg, make, self.name)


class RLBasic(EnvRL[RLBasicConfig]):
    """RL on a verifiable task (arithmetic locally, GSM8K in the cookbook preset)."""

    name = "rl_basic"
