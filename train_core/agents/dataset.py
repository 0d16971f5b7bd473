"""A dataset of tasks for an agent: batch i is `groups_per_batch` tasks, each a group of
`group_size` rollouts of the same agent function (what an env dataset is to classic envs)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from train_core.agents.rollouts import AgentGroupBuilder, AgentRollout
from train_core.rl.types import RLDataset


@dataclass(frozen=True, eq=False)
class AgentTasks(RLDataset):
    """Consecutive runs of `tasks`; a last partial batch is left out (as a pass over rows is)."""

    rollout: AgentRollout
    tasks: Sequence[Any]
    groups_per_batch: int
    group_size: int
    tags: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.groups_per_batch < 1 or self.group_size < 1:
            raise ValueError(
                f"AgentTasks: groups_per_batch {self.groups_per_batch} and group_size "
                f"{self.group_size}; expected both at least 1"
            )

    def get_batch(self, index: int) -> Sequence[Any]:
        """AgentGroupBuilders: not EnvGroupBuilders, which the RL seam tells apart by type."""
        if not 0 <= index < len(self):
            raise IndexError(f"AgentTasks: batch {index} of {len(self)}")
        start = index * self.groups_per_batch
        return [
            AgentGroupBuilder(self.rollout, task, self.group_size, self.tags)
            for task in self.tasks[start : start + self.groups_per_batch]
        ]

    def __len__(self) -> int:
        return len(self.tasks) // self.groups_per_batch
