"""Server-side futures: every asynchronous request gets a request id at once; its result is
long-polled through /api/v1/retrieve_future. Training requests of one model run through a
`ModelLane`, strictly in the client's seq_id order, however the HTTP requests interleave.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from concurrent.futures import Future, InvalidStateError, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from kitchen.engine.futures import APIFuture

# Result encodings: ForwardBackwardOutput and SampleResponse go out as protobuf, the rest as JSON.
FWDBWD, SAMPLE, MODEL = "fwdbwd", "sample", "model"


@dataclass
class RequestRecord:
    """One submitted request: what its result encodes as, and the future that carries it."""

    request_id: str
    encoding: str
    future: Future[Any] = field(default_factory=Future)
    session_id: str | None = None
    delivered_at: float | None = None  # when a poll last returned its result
    cancel_work: Callable[[], Any] | None = None  # drops the engine work behind it, if queued

    def cancel(self, reason: str) -> None:
        """Drop the work (cancel_future, or its session ended) and fail the record with `reason`."""
        with contextlib.suppress(InvalidStateError):  # unless it finished meanwhile
            self.future.set_exception(Cancelled(reason))
        if self.cancel_work is not None:  # after: the engine's CancelledError must not win
            self.cancel_work()


class Cancelled(Exception):
    """A request dropped before it finished (its session ended, or the client cancelled it)."""


class RequestStore:
    """Request id -> record. A delivered result stays `keep_delivered_s` (a poll retried after a
    lost response must still find it); beyond `capacity` records the oldest finished go first."""

    def __init__(self, capacity: int = 4096, keep_delivered_s: float = 120.0) -> None:
        self._records: OrderedDict[str, RequestRecord] = OrderedDict()
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._capacity = capacity
        self._keep_delivered_s = keep_delivered_s

    def new(self, encoding: str, session_id: str | None = None) -> RequestRecord:
        number = next(self._ids)
        record = RequestRecord(f"req-{number}", encoding, session_id=session_id)
        with self._lock:
            self._records[record.request_id] = record
            if number % 256 == 0 or len(self._records) > self._capacity:
                self._sweep()
        return record

    def cancel_session(self, session_id: str, reason: str) -> int:
        """Cancel every unfinished request of `session_id`; how many there were."""
        with self._lock:
            records = [
                r
                for r in self._records.values()
                if r.session_id == session_id and not r.future.done()
            ]
        for record in records:
            record.cancel(reason)
        return len(records)

    def cancel_all(self, reason: str) -> None:
        with self._lock:
            records = [r for r in self._records.values() if not r.future.done()]
        for record in records:
            record.cancel(reason)

    def get(self, request_id: str) -> RequestRecord | None:
        with self._lock:
            return self._records.get(request_id)

    def delivered(self, record: RequestRecord) -> None:
        record.delivered_at = time.monotonic()

    def _sweep(self) -> None:
        cutoff = time.monotonic() - self._keep_delivered_s
        for request_id, record in list(self._records.items()):
            if record.delivered_at is not None and record.delivered_at < cutoff:
                del self._records[request_id]
        for request_id, record in list(self._records.items()):
            if len(self._records) <= self._capacity:
                break
            if record.future.done():
                del self._records[request_id]

    async def wait(self, record: RequestRecord, timeout: float) -> bool:
        """Wait up to `timeout` seconds for the record's result; True when it is ready.

        `asyncio.wait` (not `wait_for`) so a poll that times out never cancels the work."""
        if record.future.done():
            return True
        waiter = asyncio.wrap_future(record.future)
        # A waiter whose poll timed out still receives the request's error later: mark it seen
        # (the next poll reports it), or asyncio logs it with a traceback as never retrieved.
        waiter.add_done_callback(lambda w: w.cancelled() or w.exception())
        done, _ = await asyncio.wait({waiter}, timeout=timeout)
        return bool(done)


def chain(source: Any, target: Future[Any]) -> None:
    """Resolve `target` with `source`: a kitchen APIFuture (chained when it finishes) or a value."""
    if not isinstance(source, APIFuture):
        _settle(target, lambda: source)
        return
    source.add_done_callback(lambda _: _settle(target, source.result))


def _settle(target: Future[Any], get: Callable[[], Any]) -> None:
    """Resolve `target` with `get()` (or its exception), unless it was settled already (cancelled)."""
    try:
        value = get()
    except BaseException as e:
        with contextlib.suppress(InvalidStateError):
            target.set_exception(e)
        return
    with contextlib.suppress(InvalidStateError):
        target.set_result(value)


@dataclass
class LaneEvent:
    """When a request reached the engine and when it finished; for `kitchen serve` stats."""

    seq_id: int | None
    kind: str
    dispatched_at: float
    finished_at: float | None = None


@dataclass
class _Job:
    seq_id: int | None
    kind: str
    run: Callable[[], Any]
    target: Future[Any]
    blocking: bool


class ModelLane:
    """Runs one model's requests in seq_id order (the SDK numbers them from 1).

    Most jobs only hand work to the engine (which queues it behind earlier work, so a pipelining
    client keeps the engine busy) and run inline, on the thread that released them: no thread hop
    on the request path. A blocking job (a sampler snapshot waits for all earlier work) runs on
    the lane's own thread, and the jobs after it wait for it."""

    def __init__(self, name: str, first_seq_id: int = 1) -> None:
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"lane-{name}")
        self._next = first_seq_id
        self._waiting: dict[int, _Job] = {}
        self._ready: deque[_Job] = deque()
        self._busy = False  # a blocking job is running
        self._lock = threading.Lock()
        self.events: deque[LaneEvent] = deque(maxlen=4096)

    def submit(
        self,
        seq_id: int | None,
        kind: str,
        run: Callable[[], Any],
        target: Future[Any],
        blocking: bool = False,
    ) -> None:
        job = _Job(seq_id, kind, run, target, blocking)
        with self._lock:
            if seq_id is None:  # unnumbered: runs after whatever was released before it
                self._ready.append(job)
            elif seq_id < self._next or seq_id in self._waiting:
                target.set_exception(ValueError(f"seq_id {seq_id} was already used on this model"))
                return
            else:
                self._waiting[seq_id] = job
                while self._next in self._waiting:
                    self._ready.append(self._waiting.pop(self._next))
                    self._next += 1
            self._drain()

    def _drain(self) -> None:
        # Called with the lock held; inline jobs are quick (they submit to the engine).
        while self._ready and not self._busy:
            job = self._ready.popleft()
            event = LaneEvent(job.seq_id, job.kind, 0.0)
            self.events.append(event)
            job.target.add_done_callback(functools.partial(_finish, event))
            if job.blocking:
                self._busy = True
                self._executor.submit(self._run_blocking, event, job)
            else:
                _run(event, job)

    def _run_blocking(self, event: LaneEvent, job: _Job) -> None:
        try:
            _run(event, job)
        finally:
            with self._lock:
                self._busy = False
                self._drain()

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)


def _finish(event: LaneEvent, _: Future[Any]) -> None:
    event.finished_at = time.perf_counter()


def _run(event: LaneEvent, job: _Job) -> None:
    event.dispatched_at = time.perf_counter()
    if job.target.done():  # cancelled while it waited its turn: the engine never sees it
        return
    try:
        out = job.run()
    except BaseException as e:
        _settle(job.target, functools.partial(_reraise, e))
        return
    chain(out, job.target)


def _reraise(error: BaseException) -> Any:
    raise error


def idle_gaps(events: list[LaneEvent]) -> list[float]:
    """Seconds the engine waited between consecutive requests of a lane: a request dispatched
    before the previous one finished was already queued, so it counts as no gap."""
    gaps = []
    for prev, cur in itertools.pairwise(events):
        if prev.finished_at is not None:
            gaps.append(max(0.0, cur.dispatched_at - prev.finished_at))
    return gaps
