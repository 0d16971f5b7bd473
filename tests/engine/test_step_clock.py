"""Step time in the runner: `time/total`, the phases (`time/<phase>`) charged to the step whose
work they were also when that step's future is awaited a step later, and `tokens_per_second`."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from typing import Any

import pytest

from kitchen.engine.futures import APIFuture, gather
from kitchen.engine.graph import Await, Loop, Workflow
from kitchen.engine.runner import BaseHook, execute
from kitchen.engine.stage import Context, stage

from .states import ToyState

DELAY = 0.1  # how long the "backend" takes; lower bounds only: a loaded machine is slower


def later(value: Any, seconds: float) -> APIFuture[Any]:
    """A future a timer thread resolves `seconds` from now, as a backend's worker would."""
    inner: concurrent.futures.Future[Any] = concurrent.futures.Future()
    threading.Timer(seconds, inner.set_result, (value,)).start()
    return APIFuture(inner)


class Records(BaseHook):
    """What the runner reports: every record (a step's, or one reported later), and what each
    iteration's on_step_end carried."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []
        self.step_ends: list[dict[str, Any]] = []

    def on_step_end(self, step: int, metrics: dict[str, Any]) -> None:
        self.step_ends.append(dict(metrics))
        if set(metrics) > {"time/total"}:
            self.records.append({"step": step, **metrics})

    def on_metrics(self, step: int, metrics: dict[str, Any]) -> None:
        self.records.append({"step": step, **metrics})


def run(steps: list[Any]) -> tuple[Records, float]:
    hook = Records()
    t0 = time.perf_counter()
    execute(Workflow("toy", ToyState, steps), Context(state=ToyState()), hooks=[hook])
    return hook, time.perf_counter() - t0


class SerialBackend:
    """One worker runs the requests in order, DELAY each, as an engine's compute thread does."""

    def __init__(self) -> None:
        self.worker = concurrent.futures.ThreadPoolExecutor(max_workers=1)

    def request(self, value: Any) -> APIFuture[Any]:
        return APIFuture(self.worker.submit(lambda: time.sleep(DELAY) or value))


BACKEND = SerialBackend()


@stage(reads={"fut"}, writes={"fut"})
def submit_step(ctx: Any) -> None:
    """forward_backward then optim_step, queued behind the previous step's."""
    fb = ctx.clock.request("forward_backward", BACKEND.request, "fb")
    optim = ctx.clock.request("optim_step", BACKEND.request, "optim")
    step = ctx.state.step
    tracked = ctx.clock.track(gather(fb, optim), "optim_step").map(lambda _: step)
    ctx.state.fut = [*ctx.state.fut, tracked]


@stage(reads={"fut_result"})
def log_step(ctx: Any) -> dict[str, Any] | None:
    done = ctx.state.fut_result
    return None if done is None else {"step": done, "num_tokens": 1000}


def test_a_pipelined_steps_wait_counts_toward_it_and_is_split_where_each_part_finished():
    drain = [Await("fut", into="fut_result"), log_step]
    body = [submit_step, Await("fut", into="fut_result", keep=1), log_step]
    hook, wall = run([Loop("batch", 3, "batch_idx", body, steps=True), *drain])

    assert [r["step"] for r in hook.records] == [0, 1, 2]
    for r in hook.records:
        # step N is awaited while the loop runs step N + 1, yet the wait is step N's
        assert r["time/forward_backward"] >= 0.5 * DELAY
        assert r["time/optim_step"] >= 0.5 * DELAY  # the wait after forward_backward finished
        assert r["time/forward_backward"] + r["time/optim_step"] >= 1.5 * DELAY
        assert r["tokens_per_second"] == pytest.approx(1000 / r["time/total"])
    # time/total runs from one step's record to the next (the first from the loop's start): the
    # first step's includes its wait, and the totals add up to no more than the run's wall time
    assert hook.records[0]["time/total"] >= 1.5 * DELAY
    assert sum(r["time/total"] for r in hook.records) <= wall
    # an iteration whose step reports later tells on_step_end only its own wall time
    assert all(set(m) == {"time/total"} for m in hook.step_ends)


def test_a_wait_behind_an_earlier_steps_requests_is_their_time_not_the_waiting_phases():
    @stage(phase="reference")
    async def score_reference(ctx: Any) -> None:
        await BACKEND.request("reference")  # queued behind the previous step's update

    drain = [Await("fut", into="fut_result"), log_step]
    body = [score_reference, submit_step, Await("fut", into="fut_result", keep=1), log_step]
    hook, _ = run([Loop("batch", 3, "batch_idx", body, steps=True), *drain])

    assert [r["step"] for r in hook.records] == [0, 1, 2]
    for r in hook.records:
        # the reference waits DELAY for itself after 2 x DELAY for step N - 1's update, which
        # step N - 1's forward_backward and optim_step get
        assert r["time/forward_backward"] >= 0.5 * DELAY
        assert r["time/optim_step"] >= 0.5 * DELAY
        assert 0.5 * DELAY <= r["time/reference"] < 2.5 * DELAY


def test_a_stage_with_a_phase_counts_whole_inside_steps_and_nowhere_outside():
    @stage(phase="sampling")
    async def setup_sampling(ctx: Any) -> None:
        await asyncio.sleep(3 * DELAY)

    @stage(phase="sampling")
    async def sample(ctx: Any) -> dict[str, Any]:
        await asyncio.sleep(DELAY)
        return {"num_tokens": 50}

    hook, _ = run([setup_sampling, Loop("batch", 2, "batch_idx", [sample], steps=True)])

    assert [r["step"] for r in hook.records] == [0, 1]
    for r in hook.records:
        assert DELAY <= r["time/sampling"] < 3 * DELAY  # the setup's sampling is no step's
        assert r["time/total"] >= r["time/sampling"]
        assert r["tokens_per_second"] == pytest.approx(50 / r["time/total"])


def test_a_submitted_requests_call_and_waits_count_toward_its_phase():
    @stage()
    async def train(ctx: Any) -> dict[str, Any]:
        await ctx.clock.submit("forward_backward", later, "fb", DELAY)
        ctx.clock.submit("optim_step", later, "optim", DELAY).result()  # a sync wait too
        return {"loss": 1.0}

    hook, _ = run([Loop("batch", 2, "batch_idx", [train], steps=True)])

    for r in hook.records:
        assert r["time/forward_backward"] >= 0.9 * DELAY
        assert r["time/optim_step"] >= 0.9 * DELAY
        assert "tokens_per_second" not in r  # no num_tokens, no throughput


def test_a_stage_reporting_the_current_step_joins_that_steps_one_record():
    @stage(reads={"batch_idx"})
    def explicit(ctx: Any) -> dict[str, Any]:
        return {"step": ctx.state.step, "x": ctx.state.batch_idx}

    @stage()
    def plain(ctx: Any) -> dict[str, Any]:
        return {"y": 2}

    hook, _ = run([Loop("batch", 2, "batch_idx", [explicit, plain], steps=True)])

    assert [(r["step"], r["x"], r["y"]) for r in hook.records] == [(0, 0, 2), (1, 1, 2)]
    assert all(r["time/total"] > 0 for r in hook.records)
