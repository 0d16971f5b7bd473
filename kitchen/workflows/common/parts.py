"""A training workflow in named parts that other workflows compose by list splicing."""

from __future__ import annotations

from typing import NamedTuple

from kitchen.engine.graph import Node


class WorkflowParts(NamedTuple):
    """A training workflow in four parts: `client` opens the training client (and any frozen
    reference); `data` loads the rows; `train` turns them into datums and runs the step loop to
    its final evaluation; `finish` saves, registers and reports. A workflow that brings its own
    data (prompt distillation: a teacher writes the conversations) swaps `data` and keeps the rest.
    """

    client: list[Node]
    data: list[Node]
    train: list[Node]
    finish: list[Node]

    def nodes(self) -> list[Node]:
        return [*self.client, *self.data, *self.train, *self.finish]


def optional(condition: bool, *nodes: Node) -> list[Node]:
    """`nodes` when `condition` holds at build time, else nothing; splice it with `*`."""
    return list(nodes) if condition else []
