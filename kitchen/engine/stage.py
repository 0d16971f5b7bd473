"""The Stage protocol and the Context a stage runs in.

A stage is a small object: `name`, `reads`, `writes` (state field names) and `__call__(ctx)`, sync or
async, returning a metrics dict or None. Options are constructor arguments bound by the workflow
factory; stages never read the recipe config.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Protocol, TypeVar, runtime_checkable

from kitchen.engine.errors import StageError
from kitchen.engine.phases import StepClock
from kitchen.engine.state import BaseState

if TYPE_CHECKING:
    from kitchen.ports import DatasetStore, TrainingBackend

S = TypeVar("S", bound=BaseState)
Metrics = dict[str, Any]


@runtime_checkable
class Stage(Protocol):
    name: str
    reads: frozenset[str]
    writes: frozenset[str]

    def __call__(self, ctx: Any) -> Metrics | Awaitable[Metrics | None] | None: ...


def stage_ports(stage: Any) -> frozenset[str]:
    """Ports a stage needs ('backend', 'datasets', ...); optional attribute `ports`."""
    return frozenset(getattr(stage, "ports", frozenset()))


def stage_phase(stage: Any) -> str | None:
    """The step phase a stage's whole wall time counts toward (`time/<phase>`: 'sampling',
    'reference', ...); optional attribute `phase` (kitchen/engine/phases.py)."""
    return getattr(stage, "phase", None)


class SourceToInto:
    """Mixin of a stage that turns the state field named `source` into the one named `into`,
    with the fixed fields `needs` (clients, renderer) read beside it. The dataclass declares
    `source` and `into` with their defaults."""

    source: str
    into: str
    needs: ClassVar[frozenset[str]] = frozenset()

    @property
    def reads(self) -> frozenset[str]:
        return self.needs | {self.source}

    @property
    def writes(self) -> frozenset[str]:
        return frozenset({self.into})


@dataclass
class Resume:
    """Where a resumed run picks up: the loop cursor and the state checkpoint to load."""

    cursor: dict[str, int]
    step: int
    state_path: str | None
    sampler_path: str | None = None


@dataclass
class Context(Generic[S]):
    """What a stage sees: the (write-guarded) state, the ports, and where it is in the run."""

    state: S
    backend: TrainingBackend | None = None
    datasets: DatasetStore | None = None
    ports: dict[str, Any] = field(default_factory=dict)
    log_dir: Path | None = None
    path: str = ""
    resume: Resume | None = None
    logger: logging.Logger = field(default_factory=lambda: logging.getLogger("kitchen"))
    # Set by the runner: the loop cursor of the iteration after the current one (for checkpoints).
    next_cursor: Callable[[], dict[str, int]] = field(default=lambda: {})
    # Set by the launch for a stage that runs a workflow of its own in a sub-folder (a run's
    # sections): the run's --max-steps, and `open_folder(folder)` -> the folder's resume point and
    # the hooks that log into it, as the launch prepares a run directory (metrics.jsonl rewritten).
    max_steps: int | None = None
    open_folder: Callable[[Path], tuple[Resume | None, list[Any]]] | None = None
    # Set by the runner: seconds per phase of each step (kitchen/engine/phases.py).
    clock: StepClock = field(default_factory=StepClock)

    def port(self, name: str) -> Any:
        if name == "backend" and self.backend is not None:
            return self.backend
        if name == "datasets" and self.datasets is not None:
            return self.datasets
        if name not in self.ports:
            raise StageError(f"stage at {self.path} needs port {name!r}, which is not configured")
        return self.ports[name]

    def require_backend(self) -> TrainingBackend:
        if self.backend is None:
            raise StageError(f"stage at {self.path} needs a training backend; none is configured")
        return self.backend


@dataclass(frozen=True)
class FunctionStage:
    """A stage made from a plain function by the `@stage` decorator."""

    fn: Callable[[Context[Any]], Metrics | Awaitable[Metrics | None] | None]
    name: str
    reads: frozenset[str]
    writes: frozenset[str]
    ports: frozenset[str] = frozenset()
    phase: str | None = None

    def __call__(self, ctx: Context[Any]) -> Metrics | Awaitable[Metrics | None] | None:
        return self.fn(ctx)

    def describe(self) -> str:
        return self.name


def stage(
    *,
    reads: set[str] | frozenset[str] = frozenset(),
    writes: set[str] | frozenset[str] = frozenset(),
    name: str | None = None,
    ports: set[str] | frozenset[str] = frozenset(),
    phase: str | None = None,
) -> Callable[[Callable[[Context[Any]], Any]], FunctionStage]:
    """Turn `def my_stage(ctx) -> metrics | None` (sync or async) into a stage.

    @stage(reads={"batch"}, writes={"batch_tokens"})
    def count_tokens(ctx):
        ctx.state.batch_tokens = sum(d.model_input.length for d in ctx.state.batch)
    """

    def wrap(fn: Callable[[Context[Any]], Any]) -> FunctionStage:
        return FunctionStage(
            fn=fn,
            name=name or fn.__name__,
            reads=frozenset(reads),
            writes=frozenset(writes),
            ports=frozenset(ports),
            phase=phase,
        )

    return wrap
