"""A workflow is data: a list of nodes built by a plain function of the recipe config.

Nodes: a stage, `Loop`, `When`, `Await`; `Workflow(..., finally_=[...])` always runs its finally
nodes. Config branches are Python `if` at build time; state branches are `When` at run time.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from kitchen.engine.futures import APIFuture
from kitchen.engine.stage import Context, Metrics
from kitchen.engine.state import BaseState

S = TypeVar("S", bound=BaseState)


@dataclass(frozen=True)
class Await:
    """Resolve the oldest futures of the `PendingQueue` in `field` until at most `keep` remain in
    flight (`keep=1`: submit step N+1, then await step N); `into` gets the last result, or None.

    A no-op when nothing is pending, so the first iteration of a pipelined loop needs no special case.
    """

    field: str
    into: str | None = None
    keep: int = 0

    @property
    def name(self) -> str:
        return f"await_{self.field}"

    @property
    def reads(self) -> frozenset[str]:
        return frozenset({self.field})

    @property
    def writes(self) -> frozenset[str]:
        return frozenset({self.field} | ({self.into} if self.into else set()))

    async def __call__(self, ctx: Context[Any]) -> Metrics | None:
        queue: list[APIFuture[Any]] = getattr(ctx.state, self.field)
        result = None
        while len(queue) > self.keep:
            result = await queue[0]
            queue = queue[1:]
        setattr(ctx.state, self.field, queue)
        if self.into:
            setattr(ctx.state, self.into, result)
        return None

    def describe(self) -> str:
        keep = f" (keep {self.keep} in flight)" if self.keep else ""
        return f"await {self.field}{keep}" + (f" -> {self.into}" if self.into else "")


@dataclass(frozen=True)
class Every:
    """Predicate: true on every n-th value of a loop index (1-based: steps n, 2n, ...)."""

    n: int
    index: str = "batch_idx"
    offset: int = 1

    @property
    def reads(self) -> frozenset[str]:
        return frozenset({self.index})

    @classmethod
    def before_step(cls, n: int) -> Every:
        """True before steps 0, n, 2n, ... (0-based `step`): a stage under it sees the weights
        the step starts from, e.g. a pre-step evaluation."""
        return cls(n, "step", offset=0)

    def __call__(self, state: Any) -> bool:
        return self.n > 0 and (getattr(state, self.index) + self.offset) % self.n == 0

    def __str__(self) -> str:
        return f"every {self.n} ({self.index})" if self.n > 0 else "never (every=0)"


@dataclass(frozen=True)
class When:
    """Run `body` only when `predicate(state)` holds (checked at run time), else `orelse`."""

    predicate: Callable[[Any], bool]
    body: Sequence[Node]
    orelse: Sequence[Node] = ()

    @property
    def reads(self) -> frozenset[str]:
        return frozenset(getattr(self.predicate, "reads", frozenset()))

    def describe(self) -> str:
        return f"when {self.predicate}"


@dataclass(frozen=True)
class Loop:
    """Run `body` once per value of `over`, writing the value to state field `index`.

    `over`: an int or range, or the name of a state field holding an int count (known only at run
    time, e.g. the number of batches after the dataset is loaded). `steps=True` marks the loop whose
    iterations are training steps: the runner counts them, flushes metrics per step and honours
    --max-steps there.
    """

    name: str
    over: int | range | str
    index: str
    body: Sequence[Node]
    steps: bool = False

    @property
    def reads(self) -> frozenset[str]:
        return frozenset({self.over}) if isinstance(self.over, str) else frozenset()

    def values(self, state: Any) -> range:
        if isinstance(self.over, str):
            return range(int(getattr(state, self.over)))
        if isinstance(self.over, int):
            return range(self.over)
        return self.over

    def describe(self) -> str:
        over = self.over if not isinstance(self.over, int) else f"range({self.over})"
        return f"loop {self.name} over {over} -> {self.index}" + (" [steps]" if self.steps else "")


Node = Any  # a stage object, Loop, When or Await


@dataclass
class Workflow(Generic[S]):
    """A named graph of `nodes` over one state class; `finally_` nodes always run after them."""

    name: str
    state: type[S]
    nodes: list[Node]
    finally_: list[Node] = field(default_factory=list)
    description: str = ""

    def render(self) -> str:
        from kitchen.engine.render import render

        return render(self)

    def validate(self, ports: set[str] | None = None) -> None:
        from kitchen.engine.validate import validate

        validate(self, ports=ports)
