"""An env dataset over a list of rows: batch `i` is rows `i * batch_size` onwards, each row one
group of `group_size` envs of one problem (the last batch may be short)."""

from __future__ import annotations

import math
from abc import abstractmethod
from collections.abc import Callable, Sequence
from typing import Any

from train_core.rl.problem_env import ProblemEnv, ProblemGroupBuilder
from train_core.rl.types import EnvGroupBuilder, RLDataset


class ProblemRows(RLDataset):
    """Consecutive slices of `rows`, one ProblemGroupBuilder tagged `dataset_name` per row; a
    subclass says how a row becomes its env (`env_of`)."""

    def __init__(
        self, rows: Sequence[Any], batch_size: int, group_size: int, dataset_name: str
    ) -> None:
        self.rows, self.batch_size, self.group_size = rows, batch_size, group_size
        self.dataset_name = dataset_name

    @abstractmethod
    def env_of(self, row: Any) -> Callable[[], ProblemEnv]: ...

    def get_batch(self, index: int) -> Sequence[EnvGroupBuilder]:
        rows = self.rows[index * self.batch_size : (index + 1) * self.batch_size]
        return [
            ProblemGroupBuilder(
                env_thunk=self.env_of(row), num_envs=self.group_size, dataset_name=self.dataset_name
            )
            for row in rows
        ]

    def __len__(self) -> int:
        return math.ceil(len(self.rows) / self.batch_size)
