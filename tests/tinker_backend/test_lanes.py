"""Server-side ordering: a model's requests run in seq_id order however they arrive, blocking jobs
hold back the ones after them, and a rejected request never stalls the lane."""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future
from typing import Any

import pytest

from kitchen.serve.requests import ModelLane, RequestStore, idle_gaps


def _submit(
    lane: ModelLane, seq_id: int, log: list[int], blocking: bool = False, **kw: Any
) -> Future[Any]:
    target: Future[Any] = Future()

    def run() -> int:
        if kw.get("sleep"):
            time.sleep(kw["sleep"])
        if kw.get("fail"):
            raise ValueError(f"request {seq_id} is wrong")
        log.append(seq_id)
        return seq_id

    lane.submit(seq_id, "op", run, target, blocking)
    return target


def test_requests_run_in_seq_order_whatever_order_they_arrive_in() -> None:
    lane, log = ModelLane("m"), []
    futures = {s: _submit(lane, s, log) for s in (3, 1, 4, 2)}
    assert log == [1, 2, 3, 4]
    assert [futures[s].result(timeout=1) for s in (1, 2, 3, 4)] == [1, 2, 3, 4]
    late = _submit(lane, 2, log)  # a seq_id used before is refused, the rest unaffected
    with pytest.raises(ValueError, match="already used"):
        late.result(timeout=1)


def test_a_blocking_job_holds_back_later_jobs_until_it_finishes() -> None:
    lane, log = ModelLane("m"), []
    first = _submit(lane, 1, log, blocking=True, sleep=0.2)
    second = _submit(lane, 2, log)
    assert log == [] and not second.done()  # submit returned at once; job 2 waits for job 1
    assert second.result(timeout=5) == 2 and first.result() == 1
    assert log == [1, 2]
    lane.close()


def test_a_failed_request_does_not_stall_the_ones_after_it() -> None:
    lane, log = ModelLane("m"), []
    failed = _submit(lane, 1, log, fail=True)
    after = _submit(lane, 2, log)
    with pytest.raises(ValueError, match="request 1 is wrong"):
        failed.result(timeout=1)
    assert after.result(timeout=1) == 2
    assert len(idle_gaps(list(lane.events))) == 1


def test_polls_wait_for_the_result_and_time_out_without_cancelling_it() -> None:
    import asyncio

    store = RequestStore()
    record = store.new("model")
    assert asyncio.run(store.wait(record, 0.05)) is False
    assert not record.future.cancelled()
    threading.Timer(0.05, record.future.set_result, args=("done",)).start()
    assert asyncio.run(store.wait(record, 5)) is True
    assert store.get(record.request_id) is record
