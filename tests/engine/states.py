"""Small states and stages shared by the engine tests."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import Field

from kitchen.engine.futures import APIFuture
from kitchen.engine.state import BaseState, Handle, PendingQueue


class ToyState(BaseState):
    n_items: int | None = None
    items: list[int] | None = None
    batch_idx: int = 0
    epoch_idx: int = 0
    total: int = 0
    trace: list[str] = Field(default_factory=list)
    fut: PendingQueue[int]
    fut_result: int | None = None
    client: Handle[Any]


@dataclass(frozen=True)
class Load:
    n: int = 3
    name: str = "load"
    reads: frozenset[str] = frozenset()
    writes: frozenset[str] = frozenset({"items", "n_items"})

    def __call__(self, ctx: Any) -> None:
        ctx.state.items = list(range(self.n))
        ctx.state.n_items = self.n


@dataclass(frozen=True)
class Add:
    name: str = "add"
    reads: frozenset[str] = frozenset({"items", "batch_idx", "total", "trace"})
    writes: frozenset[str] = frozenset({"total", "trace"})

    def __call__(self, ctx: Any) -> dict[str, float]:
        ctx.state.total = ctx.state.total + ctx.state.items[ctx.state.batch_idx]
        ctx.state.trace = [*ctx.state.trace, f"add{ctx.state.batch_idx}"]
        return {"total": ctx.state.total}


@dataclass(frozen=True)
class Submit:
    name: str = "submit"
    reads: frozenset[str] = frozenset({"batch_idx", "fut"})
    writes: frozenset[str] = frozenset({"fut"})

    def __call__(self, ctx: Any) -> None:
        ctx.state.fut = [*ctx.state.fut, APIFuture.completed(ctx.state.batch_idx * 10)]


@dataclass(frozen=True)
class Mark:
    label: str
    name: str = "mark"
    reads: frozenset[str] = frozenset({"trace"})
    writes: frozenset[str] = frozenset({"trace"})

    def __call__(self, ctx: Any) -> None:
        ctx.state.trace = [*ctx.state.trace, self.label]


@dataclass(frozen=True)
class Boom:
    name: str = "boom"
    reads: frozenset[str] = frozenset()
    writes: frozenset[str] = frozenset()

    def __call__(self, ctx: Any) -> None:
        raise ValueError("boom")
