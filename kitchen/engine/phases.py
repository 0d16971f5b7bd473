"""Where a training step's time goes: seconds per phase (`time/sampling`, `time/reference`,
`time/forward_backward`, `time/optim_step`, ...), each charged to the step whose work it was.

A phase's time is the workflow's own wall time on it: submitting the requests plus waiting for
their results. A stage that is one phase throughout declares it (`phase = "sampling"`) and the
runner charges its whole wall time; a stage that does several times its parts, never both: a
block with `ctx.clock.phase(name)`, a request with `ctx.clock.request(phase, fn, ...)`, a wait
with `ctx.clock.track(future, phase)`, or a request and its waits with `ctx.clock.submit`.
With pipelining the wait on step N's future happens while the loop runs step N + 1; a tracked
request remembers the step that submitted it, so that wait still counts toward step N.
Work overlaps (a backend computes while the loop submits the next step), so the phases of a step
need not add up to its `time/total`.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

from kitchen.engine.futures import APIFuture

T = TypeVar("T")
U = TypeVar("U")


class StepClock:
    """The seconds each step spent per phase, kept until the step's record is written.

    `step` is the step the runner is executing (None outside the steps loop: setup and the final
    evaluation are no step's). `time/total` is the wall time from the previous step's record to
    this one's (from the loop's start for the first), so a run's totals add up to the loop's
    wall time and `num_tokens / time/total` is the throughput also when steps are pipelined.

    Backends work through requests in order (the local engine has one compute thread), so while
    the loop waits on one thing it is also waiting on the tracked requests submitted before it:
    a stretch of a wait that ends when such a request finished is that request's phase's time,
    in the step that submitted it (DPO's reference scoring of step N waits behind step N - 1's
    forward_backward; that part of the wait is step N - 1's forward_backward).
    """

    def __init__(self) -> None:
        self.step: int | None = None
        self._seconds: dict[int, dict[str, float]] = {}
        self._last_record: float | None = None
        self._in_flight: list[_Work] = []  # tracked requests in submission order

    def add(self, step: int | None, phase: str, seconds: float) -> None:
        if step is None:
            return
        spent = self._seconds.setdefault(step, {})
        spent[phase] = spent.get(phase, 0.0) + seconds

    def charge(self, step: int | None, phase: str, start: float, end: float) -> None:
        """The loop spent [start, end] on `phase` of `step`: the stretches up to the moments
        earlier tracked requests finished go to theirs, the rest to `phase`."""
        cursor = start
        while self._in_flight:
            finished = self._in_flight[0].finished
            if finished is None or finished > end:
                break  # in order: nothing after an unfinished request finished before it
            work = self._in_flight.pop(0)
            if finished > cursor:
                self.add(work.step, work.phase, finished - cursor)
                cursor = finished
        self.add(step, phase, end - cursor)

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Charge the block's wall time (awaits inside it included) to `name` of this step."""
        step, t0 = self.step, time.perf_counter()
        try:
            yield
        finally:
            self.charge(step, name, t0, time.perf_counter())

    def request(
        self, phase: str, fn: Callable[..., APIFuture[T]], *args: Any, **kwargs: Any
    ) -> APIFuture[T]:
        """`fn(*args, **kwargs)`, a request to a client: the call's time goes to `phase` of this
        step, and the request joins those in flight, so that any tracked wait that outlasts it
        (this step's or a later one's) is split at the moment it finished."""
        with self.phase(phase):
            future = fn(*args, **kwargs)
        work = _Work(self.step, phase)
        future.add_done_callback(work.note)
        self._in_flight.append(work)
        return future

    def track(self, future: APIFuture[T], phase: str) -> APIFuture[T]:
        """`future` (of requests made with `request`), whose waits count toward this step: split
        where the requests in flight finished, and what is left goes to `phase`. Its `map` stays
        tracked."""
        return _TrackedFuture(future, self, self.step, phase)

    def submit(
        self, phase: str, fn: Callable[..., APIFuture[T]], *args: Any, **kwargs: Any
    ) -> APIFuture[T]:
        """A `request` whose future is tracked: its call and every later wait on it are `phase`."""
        return self.track(self.request(phase, fn, *args, **kwargs), phase)

    def start(self) -> None:
        """The steps loop starts: the first step's `time/total` counts from here."""
        if self._last_record is None:
            self._last_record = time.perf_counter()

    def close(self, step: int) -> dict[str, float]:
        """Step `step`'s record is being written: its `time/total` and `time/<phase>` keys."""
        now = time.perf_counter()
        total = now - (self._last_record if self._last_record is not None else now)
        self._last_record = now
        spent = self._seconds.pop(step, {})
        return {"time/total": total, **{f"time/{phase}": s for phase, s in spent.items()}}


@dataclass
class _Work:
    """A tracked request: whose phase it is, and when it finished (set by its done-callback, in
    the backend's thread, or at once when it is already done)."""

    step: int | None
    phase: str
    finished: float | None = None

    def note(self, _: Any) -> None:
        self.finished = time.perf_counter()


def with_throughput(metrics: dict[str, Any]) -> dict[str, Any]:
    """`tokens_per_second` = num_tokens / time/total, where a record has both."""
    tokens, seconds = metrics.get("num_tokens"), metrics.get("time/total")
    if isinstance(tokens, (int, float)) and isinstance(seconds, float) and seconds > 0:
        metrics["tokens_per_second"] = tokens / seconds
    return metrics


class _TrackedFuture(APIFuture[T]):
    """A future whose waits are charged through the clock (`StepClock.charge`): to the tracked
    requests that finished meanwhile, and what is left to `phase` of the step that submitted it."""

    def __init__(
        self, future: APIFuture[T], clock: StepClock, step: int | None, phase: str
    ) -> None:
        super().__init__(future._inner, (future,))
        self._clock, self._step, self._phase = clock, step, phase

    def _charge(self, start: float, end: float) -> None:
        self._clock.charge(self._step, self._phase, start, end)

    def map(self, fn: Callable[[T], U]) -> APIFuture[U]:
        """A future of `fn(result)` whose waits are charged as this one's."""
        return _TrackedFuture(super().map(fn), self._clock, self._step, self._phase)

    def result(self, timeout: float | None = None) -> T:
        if self.done():
            return super().result(timeout)
        start = time.perf_counter()
        try:
            return super().result(timeout)
        finally:
            self._charge(start, time.perf_counter())

    async def result_async(self, timeout: float | None = None) -> T:
        start = time.perf_counter()
        try:
            return await super().result_async(timeout)
        finally:
            self._charge(start, time.perf_counter())

    def __await__(self) -> Generator[Any, None, T]:
        start = time.perf_counter()
        try:
            return (yield from super().__await__())
        finally:
            self._charge(start, time.perf_counter())
