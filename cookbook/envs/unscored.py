"""An env whose one answer earns nothing by itself: the signal comes from elsewhere (a pairwise
tournament over the group, a teacher's KL in on-policy distillation)."""

from __future__ import annotations

from typing import Any

from tinker import types

from train_core.completers import RendererLike
from train_core.renderers.types import Message
from train_core.rl.types import Action, ActionExtra, Env, Observation, StepResult


class UnscoredEnv(Env):
    """One answer to `convo`, reward 0; the episode ends after it."""

    def __init__(self, convo: list[Message], renderer: RendererLike) -> None:
        self.convo = convo
        self.renderer = renderer

    async def initial_observation(self) -> tuple[Observation, Any]:
        stop = self.renderer.get_stop_sequences()
        return self.renderer.build_generation_prompt(self.convo), stop

    async def step(self, action: Action, *, extra: ActionExtra | None = None) -> StepResult:
        return StepResult(
            reward=0.0,
            episode_done=True,
            next_observation=types.ModelInput.empty(),
            next_stop_condition=self.renderer.get_stop_sequences(),
        )
