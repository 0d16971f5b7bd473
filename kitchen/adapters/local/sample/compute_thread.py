"""The backend's one compute thread: it runs the decode batch (decode_batch.py) and, between its
decode steps, every other torch call: training calls, model loads, checkpoint writes
(`submit_call`, `run`). One thread, because each thread that runs torch ops gets its own OpenMP
team, and more teams than cores slow every pass.

Requests on other weights (another LoRA snapshot) wait until the batch drains; while one waits, no
new request joins, so none starves. Other work runs between decode steps, in submission order.
compute_logprobs requests on the same weights are scored together once one of them is looked at
(or other work comes), and sample requests from a running event loop join the decode batch
together at the end of the loop's iteration (or after GATHER_GRACE_S): both follow the caller's
program order, never the thread's timing, since a batch's make-up moves the last bits of its
results and runs must repeat exactly. docs/adapters.md has the measurements."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Hashable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, TypeVar

from kitchen.adapters.local.model.images import Expanded
from kitchen.adapters.local.sample.decode_batch import DecodeBatch, SampleJob
from kitchen.adapters.local.sample.sampling import Generated, PromptScores
from kitchen.engine.errors import BackendError

T = TypeVar("T")

# How long sample requests gathered on an event loop may wait for it to queue them before the
# compute thread takes them itself: only a loop blocked on their result waits this long.
GATHER_GRACE_S = 2.0


@dataclass
class ScoreJob:
    """One compute_logprobs request. Jobs with equal `key` (the same weights) held back together
    are scored in one call of the first one's `score`, which takes their token sequences and
    returns each one's logprobs, in order."""

    key: Hashable
    tokens: list[int] | Expanded  # Expanded: a prompt with images (images.py)
    score: Callable[[list[list[int] | Expanded]], list[Any]]
    future: Future[Any] = field(default_factory=Future)


class ComputeThread:
    """The compute thread: it owns the running batch and runs queued calls. `submit_*` and `run`
    are safe from any thread."""

    def __init__(self, name: str = "kitchen-compute") -> None:
        self._cond = threading.Condition()
        self._pending: list[SampleJob] = []
        self._gathered: list[SampleJob] = []  # submitted from event loops, not yet queued
        self._gathered_at = 0.0  # when the first of them was submitted (monotonic)
        self._gathering: set[asyncio.AbstractEventLoop] = set()  # loops with a queueing scheduled
        self._calls: list[tuple[Callable[[], Any], Future[Any]] | list[ScoreJob]] = []
        self._held: list[ScoreJob] = []  # score requests not yet queued (see the module docstring)
        self._closed = False
        self.batch = DecodeBatch()  # touched only on the compute thread
        self.scorings = 0  # batches of compute_logprobs requests scored
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def submit_sample(self, job: SampleJob) -> Future[tuple[list[Generated], PromptScores]]:
        """Queue `job`; from a running event loop, with the requests submitted in the same
        iteration of it (see the module docstring)."""
        try:
            loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        if loop is None:
            self._put(lambda: self._pending.append(job))
            return job.future
        with self._cond:
            if self._closed:
                raise BackendError("the local backend is closed; it takes no more requests")
            if not self._gathered:
                self._gathered_at = time.monotonic()
                self._cond.notify()  # the compute thread keeps the grace period
            self._gathered.append(job)
            schedule = loop not in self._gathering
            self._gathering.add(loop)
        if schedule:
            loop.call_soon(self.queue_gathered, loop)
        return job.future

    def queue_gathered(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        """Queue the sample requests gathered on event loops, in submission order."""
        with self._cond:
            if loop is not None:
                self._gathering.discard(loop)
            if self._gathered:
                self._release_held()
                self._pending += self._gathered
                self._gathered = []
                self._cond.notify()

    def submit_call(self, fn: Callable[[], T]) -> Future[T]:
        """Run `fn` on the compute thread between decode steps, after the calls queued before it."""
        future: Future[T] = Future()
        self._put(lambda: self._calls.append((fn, future)))
        return future

    def submit_score(self, job: ScoreJob) -> Future[Any]:
        """Hold `job` until `release_scores` (or other work is submitted), then score it with the
        held requests on its weights."""
        with self._cond:
            if self._closed:
                raise BackendError("the local backend is closed; it takes no more requests")
            self._held.append(job)
        return job.future

    def release_scores(self) -> None:
        """Queue the held score requests: one batch per weights, in order of first request."""
        with self._cond:
            self._release_held()
            self._cond.notify()

    def run(self, fn: Callable[[], T]) -> T:
        """`fn()` on the compute thread, waiting for it (at once when already there)."""
        return fn() if self.on_thread() else self.submit_call(fn).result()

    def on_thread(self) -> bool:
        return threading.current_thread() is self._thread

    def close(self, cancel: bool = False) -> None:
        """Stop taking requests; finish those in flight, or (`cancel`) drop them first."""
        with self._cond:
            self._closed = True
            self._pending += self._gathered
            self._gathered = []
            if cancel:
                for job in self._pending + self.batch.jobs():
                    job.future.cancel()
                for held in self._held:
                    held.future.cancel()
                for call in self._calls:
                    for future in [j.future for j in call] if isinstance(call, list) else [call[1]]:
                        future.cancel()
            self._release_held()
            self._cond.notify()
        self._thread.join()

    def _put(self, add: Callable[[], None]) -> None:
        with self._cond:
            if self._closed:
                raise BackendError("the local backend is closed; it takes no more requests")
            self._release_held()  # held score requests keep their place before this work
            add()
            self._cond.notify()

    def _release_held(self) -> None:
        batches: dict[Hashable, list[ScoreJob]] = {}
        for job in self._held:
            batches.setdefault(job.key, []).append(job)
        self._calls.extend(batches.values())
        self._held = []

    # -- on the compute thread ---------------------------------------------------------------------

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not (self._pending or self._calls or self.batch.rows or self._closed):
                    if not self._gathered:
                        self._cond.wait()
                        continue
                    late = time.monotonic() - self._gathered_at - GATHER_GRACE_S
                    if late >= 0:  # a loop blocked on them: take them (module docstring)
                        self._pending += self._gathered
                        self._gathered = []
                    else:
                        self._cond.wait(-late)
                if self._closed and not (self._pending or self._calls or self.batch.rows):
                    return
                calls, self._calls = self._calls, []
                joining = self._admissible()
            self._run_calls(calls)
            self.batch.drop_cancelled()
            self.batch.admit([j for j in joining if not j.future.cancelled()])
            if self.batch.rows:
                self.batch.step()

    def _run_calls(
        self, calls: list[tuple[Callable[[], Any], Future[Any]] | list[ScoreJob]]
    ) -> None:
        for call in calls:
            if isinstance(call, list):
                self._score(call)
            else:
                _run_into(call[1], call[0])

    def _score(self, jobs: list[ScoreJob]) -> None:
        live = [job for job in jobs if job.future.set_running_or_notify_cancel()]
        if not live:
            return
        self.scorings += 1
        try:
            scored = live[0].score([job.tokens for job in live])
        except BaseException as e:  # every request of the batch fails; the thread goes on
            for job in live:
                job.future.set_exception(e)
            return
        for job, result in zip(live, scored, strict=True):
            job.future.set_result(result)

    def _admissible(self) -> list[SampleJob]:
        """Pending jobs on the batch's weights (all of them while nothing else waits)."""
        self._pending = [j for j in self._pending if not j.future.cancelled()]
        if not self._pending:
            return []
        rows = self.batch.rows
        key = rows[0].job.key if rows else self._pending[0].key
        if rows and any(j.key != key for j in self._pending):
            return []  # let the batch drain so the other weights get their turn
        joining = [j for j in self._pending if j.key == key]
        self._pending = [j for j in self._pending if j.key != key]
        return joining


def _run_into(future: Future[Any], fn: Callable[[], Any]) -> None:
    if not future.set_running_or_notify_cancel():
        return  # cancelled while queued
    try:
        future.set_result(fn())
    except BaseException as e:
        future.set_exception(e)
