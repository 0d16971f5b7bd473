"""Env datasets over a list of items: batch `i` is items `i * batch_size` onwards, each item one
group (the last batch may be short). ItemBatches takes the item -> group function; ProblemRows is
its case of one ProblemGroupBuilder per row, the row's env made by a subclass."""

from __future__ import annotations

import math
from abc import abstractmethod
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

from train_core.rl.problem_env import ProblemEnv, ProblemGroupBuilder
from train_core.rl.types import EnvGroupBuilder, RLDataset

T = TypeVar("T")


class ItemBatches(RLDataset, Generic[T]):
    """Consecutive slices of `items`, `batch_size` a batch, one `group(item)` per item. With
    `whole_batches` a last short batch is dropped instead."""

    def __init__(
        self,
        items: Sequence[T],
        batch_size: int,
        group: Callable[[T], EnvGroupBuilder],
        whole_batches: bool = False,
    ) -> None:
        self.items, self.batch_size, self.group = list(items), batch_size, group
        self.whole_batches = whole_batches

    def get_batch(self, index: int) -> Sequence[EnvGroupBuilder]:
        start = index * self.batch_size
        return [self.group(item) for item in self.items[start : start + self.batch_size]]

    def __len__(self) -> int:
        if self.whole_batches:
            return len(self.items) // self.batch_size
        return math.ceil(len(self.items) / self.batch_size)


class ProblemRows(ItemBatches[Any]):
    """Consecutive slices of `rows`, one ProblemGroupBuilder tagged `dataset_name` per row; a
    subclass says how a row becomes its env (`env_of`)."""

    def __init__(
        self, rows: Sequence[Any], batch_size: int, group_size: int, dataset_name: str
    ) -> None:
        super().__init__(rows, batch_size, self._group)
        self.group_size, self.dataset_name = group_size, dataset_name

    @abstractmethod
    def env_of(self, row: Any) -> Callable[[], ProblemEnv]: ...

    def _group(self, row: Any) -> EnvGroupBuilder:
        return ProblemGroupBuilder(
            env_thunk=self.env_of(row), num_envs=self.group_size, dataset_name=self.dataset_name
        )
