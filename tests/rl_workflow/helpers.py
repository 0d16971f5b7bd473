"""Shared pieces of the RL workflow tests: a fake backend that answers arithmetic, and slow envs
for the async bound."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from kitchen.adapters.fake import FakeBackend
from train_core.rl.types import Env, EnvGroupBuilder, RLDataset


def arithmetic_responder() -> Any:
    """Answers "What is x + y?" right on every other sample, so groups have mixed rewards."""
    count = [0]

    def respond(prompt_tokens: list[int]) -> str:
        text = bytes(t for t in prompt_tokens if t < 256).decode("utf-8", "ignore")
        x, y = map(int, re.findall(r"What is (\d+) \+ (\d+)\?", text)[-1])
        count[0] += 1
        return str(x + y) if count[0] % 2 else str(x + y + 1)

    return respond


def fake_backend() -> FakeBackend:
    return FakeBackend(responder=arithmetic_responder())


@dataclass
class SlowOnce:
    """Wraps a group builder: its first rollout starts only once `ready()` holds (polled)."""

    inner: Any
    ready: Callable[[], bool]
    used: list[bool] = field(default_factory=lambda: [False])

    async def make_envs(self) -> Sequence[Env]:
        if not self.used[0]:
            self.used[0] = True
            while not self.ready():
                await asyncio.sleep(0.002)
        return await self.inner.make_envs()

    async def compute_group_rewards(self, trajectory_group: Any, env_group: Any) -> Any:
        return await self.inner.compute_group_rewards(trajectory_group, env_group)

    async def cleanup(self) -> None:
        await self.inner.cleanup()

    def logging_tags(self) -> list[str]:
        return self.inner.logging_tags()


class SlowFirstGroup(RLDataset):
    """A dataset whose batch-0 first group waits for `ready()` the first time it is rolled out."""

    def __init__(self, inner: RLDataset, ready: Callable[[], bool]) -> None:
        self.inner = inner
        self._slow = SlowOnce(None, ready)

    def get_batch(self, index: int) -> Sequence[EnvGroupBuilder]:
        batch = list(self.inner.get_batch(index))
        if index == 0:
            self._slow.inner = batch[0]
            batch[0] = self._slow  # type: ignore[call-overload]
        return batch

    def __len__(self) -> int:
        return len(self.inner)
