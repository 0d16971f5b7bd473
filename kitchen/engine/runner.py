"""The async interpreter of workflows.

Depth-first over the nodes, keeping a path like `epoch[1]/batch[37]/forward_backward`. Per stage: an
OTel span, a timer, a write guard on the state, and the returned metrics passed to hooks. `finally_`
always runs, also after an error or Ctrl-C.
The runner owns the step counter, the resume cursor and the step clock: each step's record gets
its `time/total`, `time/<phase>` and `tokens_per_second` (kitchen/engine/phases.py).
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from kitchen.engine.errors import KitchenError, StageError
from kitchen.engine.graph import Loop, Node, When, Workflow
from kitchen.engine.phases import StepClock, with_throughput
from kitchen.engine.stage import Context, Metrics, Resume, stage_phase
from kitchen.engine.state import BaseState
from kitchen.engine.telemetry import record_stage, span


class Hook(Protocol):
    """Observers of a run. Every method is optional: subclass `BaseHook`, which does nothing in
    each, and override the ones you need. (The bodies say `return None`, not `...`, so that the
    protocol's methods are defaults a subclass inherits rather than abstract ones.)"""

    def on_run_start(self, workflow: Workflow[Any], state: BaseState) -> None:
        return None

    def on_loop_start(self, loop: Loop, path: str, total: int, start: int) -> None:
        return None

    def on_stage_end(self, path: str, name: str, seconds: float, metrics: Metrics | None) -> None:
        return None

    def on_step_end(self, step: int, metrics: Metrics) -> None:
        return None

    def on_metrics(self, step: int, metrics: Metrics) -> None:
        return None

    def on_run_end(self, state: BaseState, error: BaseException | None) -> None:
        return None


class BaseHook(Hook):
    """A Hook that does nothing; subclasses override the events they observe."""


class _Guard:
    """The state as one stage sees it: it may read what it declares and write only what it declares."""

    __slots__ = ("_fields", "_reads", "_state", "_who", "_writes")

    def __init__(
        self,
        state: BaseState,
        who: str,
        reads: frozenset[str],
        writes: frozenset[str],
        fields: frozenset[str],
    ) -> None:
        object.__setattr__(self, "_state", state)
        object.__setattr__(self, "_who", who)
        object.__setattr__(self, "_reads", reads | writes)
        object.__setattr__(self, "_writes", writes)
        object.__setattr__(self, "_fields", fields)

    def __getattr__(self, name: str) -> Any:
        if name in self._fields and name not in self._reads and name != "step":
            raise StageError(f"stage {self._who} read {name!r}, which it does not declare in reads")
        return getattr(self._state, name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name not in self._writes:
            raise StageError(
                f"stage {self._who} wrote {name!r}, which it does not declare in writes"
            )
        setattr(self._state, name, value)


@dataclass
class RunResult:
    state: BaseState
    steps: int
    metrics: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Runner:
    workflow: Workflow[Any]
    ctx: Context[Any]
    hooks: Sequence[Hook] = ()
    max_steps: int | None = None
    _stack: list[tuple[Loop, int, range]] = field(default_factory=list)
    _cursor: dict[str, int] = field(default_factory=dict)
    _step_metrics: Metrics = field(default_factory=dict)
    _in_step: bool = False
    # --max-steps reached: the loops on the stack end, then what follows them runs.
    _stopping: bool = False
    # Where the last finished top-level loop left off: the cursor a final checkpoint records.
    _done_cursor: dict[str, int] = field(default_factory=dict)
    _contexts: dict[int, Context[Any]] = field(default_factory=dict)
    # Steps whose iteration ended without their record: a pipelined stage reports them later.
    _unreported: set[int] = field(default_factory=set)
    _clock: StepClock = field(default_factory=StepClock)

    async def run(self) -> RunResult:
        state = self.ctx.state
        self.ctx.clock = self._clock
        resume: Resume | None = self.ctx.resume
        if resume is not None:
            self._cursor = dict(resume.cursor)
            state.step = resume.step
        self.ctx.next_cursor = self.next_cursor
        fields = frozenset(type(state).model_fields)
        self._fields = fields
        for h in self.hooks:
            h.on_run_start(self.workflow, state)
        error: BaseException | None = None
        with span("workflow", self.workflow.name):
            try:
                await self._seq(self.workflow.nodes, "")
            except BaseException as e:  # Ctrl-C and cancellation included: finally_ must still run
                error = e
            finally:
                try:
                    await self._seq(self.workflow.finally_, "finally")
                except BaseException as e:
                    error = error or e
        for h in self.hooks:
            h.on_run_end(state, error)
        if error is not None:
            raise error
        return RunResult(state=state, steps=state.step)

    def next_cursor(self) -> dict[str, int]:
        """The cursor of the iteration after the current one, carrying into outer loops."""
        if not self._stack:
            return dict(self._done_cursor)
        cursor = {loop.name: idx for loop, idx, _ in self._stack}
        for loop, idx, values in reversed(self._stack):
            pos = values.index(idx) + 1
            if pos < len(values):
                cursor[loop.name] = values[pos]
                return cursor
            cursor[loop.name] = values[-1] + 1 if len(values) else 0
            if loop is not self._stack[0][0]:
                del cursor[loop.name]
        return cursor

    async def _seq(self, nodes: Sequence[Node], path: str) -> None:
        for node in nodes:
            if isinstance(node, Loop):
                await self._loop(node, path)
            elif isinstance(node, When):
                branch = node.body if node.predicate(self.ctx.state) else node.orelse
                await self._seq(branch, path)
            else:
                await self._stage(node, path)

    async def _loop(self, loop: Loop, path: str) -> None:
        state = self.ctx.state
        values = loop.values(state)
        start = self._cursor.pop(loop.name, values.start if len(values) else 0)
        for h in self.hooks:
            h.on_loop_start(loop, path, len(values), start)
        if loop.steps:
            self._clock.start()
        for idx in values:
            if idx < start:
                continue
            if loop.steps and self.max_steps is not None and state.step >= self.max_steps:
                self._stopping = True
                self._done_cursor = {**{lp.name: i for lp, i, _ in self._stack}, loop.name: idx}
            if self._stopping:
                break
            here = f"{path}/{loop.name}[{idx}]" if path else f"{loop.name}[{idx}]"
            setattr(state, loop.index, idx)
            self._stack.append((loop, idx, values))
            try:
                with span("loop", loop.name, **{"kitchen.index": idx}):
                    if loop.steps:
                        self._in_step, self._step_metrics = True, {}
                        self._clock.step = state.step
                        t0 = time.perf_counter()
                    await self._seq(loop.body, here)
                    if loop.steps:
                        self._end_step(time.perf_counter() - t0)
            finally:
                self._stack.pop()
                if loop.steps:
                    self._in_step, self._clock.step = False, None
        if not self._stack:
            if not self._stopping:
                self._done_cursor = {loop.name: values[-1] + 1 if len(values) else start}
            self._stopping = False

    def _end_step(self, seconds: float) -> None:
        """The iteration's metrics are this step's record, with its time; an iteration that
        returned none (its step's record comes from a later, pipelined stage) reports only its own
        wall time to the hooks, and its step's time waits for that record."""
        state = self.ctx.state
        step = state.step
        if self._step_metrics:
            metrics = with_throughput({**self._step_metrics, **self._clock.close(step)})
        else:
            metrics = {"time/total": seconds}
            self._unreported.add(step)
        state.step = step + 1
        for h in self.hooks:
            h.on_step_end(step, metrics)

    async def _stage(self, node: Node, path: str) -> None:
        name = node.name
        here = f"{path}/{name}" if path else name
        ctx = self.ctx
        ctx.path = here
        guarded = self._contexts.get(id(node))
        if guarded is None:  # one guarded view per stage node, built once
            # the run's context, every field of it, with the state guarded and the runner's own
            # cursor, step limit and clock
            guarded = self._contexts[id(node)] = replace(
                ctx,
                state=_Guard(
                    ctx.state, name, frozenset(node.reads), frozenset(node.writes), self._fields
                ),
                next_cursor=self.next_cursor,
                max_steps=self.max_steps,
                clock=self._clock,
            )
        guarded.path = here
        t0 = time.perf_counter()
        try:
            with span("stage", name, **{"kitchen.path": here}):
                metrics = node(guarded)
                # an async stage returns an awaitable; the common sync case skips inspect's cost
                if not (metrics is None or type(metrics) is dict) and inspect.isawaitable(metrics):
                    metrics = await metrics
        except (KitchenError, asyncio.CancelledError, KeyboardInterrupt):
            raise
        except Exception as e:
            raise StageError(f"{here}: {type(e).__name__}: {e}") from e
        t1 = time.perf_counter()
        seconds = t1 - t0
        record_stage(name, seconds)
        phase = stage_phase(node)
        if phase:
            self._clock.charge(self._clock.step, phase, t0, t1)
        for h in self.hooks:
            h.on_stage_end(here, name, seconds, metrics)
        if not metrics:
            return
        if "step" in metrics:
            explicit = dict(metrics)
            step = int(explicit.pop("step"))
            if self._in_step and step == ctx.state.step:  # this step's record, written at its end
                self._step_metrics.update(explicit)
                return
            # A pipelined stage reports an earlier step (e.g. the one it just awaited): its own record.
            if step in self._unreported:
                self._unreported.discard(step)
                explicit = with_throughput({**explicit, **self._clock.close(step)})
            for h in self.hooks:
                h.on_metrics(step, explicit)
        elif self._in_step:
            self._step_metrics.update(metrics)
        else:
            for h in self.hooks:
                h.on_metrics(ctx.state.step, metrics)


def execute(
    workflow: Workflow[Any],
    ctx: Context[Any],
    hooks: Sequence[Hook] = (),
    max_steps: int | None = None,
) -> RunResult:
    """Run a workflow on a context you built, from sync code: the engine alone, no run directory
    and no adapters (`kitchen.run_workflow` is the user's entry point; it builds both)."""
    return asyncio.run(Runner(workflow, ctx, hooks, max_steps).run())
