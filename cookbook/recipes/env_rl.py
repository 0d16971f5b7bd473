"""The recipes that are the reinforcement workflow on an env dataset their config describes."""

from __future__ import annotations

from typing import ClassVar, TypeVar

from cookbook.envs import RLEnvFields, env_dataset
from cookbook.recipes.on_backend import on_backend
from kitchen.engine.graph import Workflow
from kitchen.engine.recipe import Recipe
from kitchen.workflows.reinforcement import RLLoopConfig, reinforcement
from kitchen.workflows.reinforcement.state import RLState
from train_core.rl.types import RLDatasetFactory

E = TypeVar("E", bound=RLLoopConfig)


class EnvRL(Recipe[E]):
    """A recipe that runs the reinforcement workflow on the env dataset `envs(cfg)` makes: its
    config's env (RLEnvFields: rl_basic, math_rl and rl_loop differ only in their configs) unless
    the recipe builds its own. `samples_on_backend`: that factory also takes the run's backend, to
    sample a second model (cookbook/recipes/on_backend.py)."""

    samples_on_backend: ClassVar[bool] = False

    def envs(self, cfg: E) -> RLDatasetFactory:
        if not isinstance(cfg, RLEnvFields):
            raise TypeError(f"recipe {self.name}: its Config must mix in RLEnvFields")
        return env_dataset(cfg, cfg.groups_per_batch, cfg.group_size, cfg.num_batches, cfg.seed)

    def workflow(self, cfg: E) -> Workflow[RLState]:
        workflow = reinforcement(cfg, self.envs(cfg), self.name)
        return on_backend(workflow) if self.samples_on_backend else workflow
