"""A GRPO group of one multi-turn game: `num_envs` copies of a MessageEnv, each run through
EnvFromMessageEnv (guess_number, twenty_questions)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from train_core.rl.message_env import EnvFromMessageEnv, MessageEnv
from train_core.rl.types import Env, EnvGroupBuilder


@dataclass(frozen=True)
class MessageEnvGroupBuilder(EnvGroupBuilder):
    """`num_envs` games made by `env_thunk` (the same problem each time), rendered with
    `renderer`; metrics are broken down by `tag`."""

    env_thunk: Callable[[], MessageEnv]
    renderer: Any
    num_envs: int
    tag: str

    async def make_envs(self) -> Sequence[Env]:
        return [EnvFromMessageEnv(self.renderer, self.env_thunk()) for _ in range(self.num_envs)]

    def logging_tags(self) -> list[str]:
        return [self.tag]
