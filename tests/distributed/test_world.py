"""World.gather on two gloo processes forked from this one: each rank > 0's accelerator peak memory
travels with its results to rank 0, which reports it at its next optim_step
(`memory/peak_gib/rank1`). The CUDA counter is read through memory.peak_gib, which a stand-in
replaces here (this CPU has none). And the ranks' heartbeats, on a stand-in for the launcher's
store."""

import multiprocessing
import os
import threading
import time
from pathlib import Path
from typing import Any

import torch.distributed  # noqa: F401  (imported once, here, for both forked ranks)

from kitchen.adapters.local.distributed.world import Heartbeats

# A rank > 0's readings at its gathers, in GiB: the stand-in hands them out in turn.
READINGS = [0.5, 2.0, 1.25, 0.75]


def _rank(rank: int, store: str, results: Any) -> None:
    import torch.distributed as dist

    from kitchen.adapters.local.distributed.world import World
    from kitchen.adapters.local.train import memory

    readings = iter(READINGS)
    memory.peak_gib = lambda device: next(readings) if device == "cuda" else None
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=2)
    world = World(rank, 2, device="cuda")
    taken = []
    gathered = [world.gather(("result", rank, i)) for i in range(3)]
    taken.append(world.take_peaks())
    gathered.append(world.gather(("result", rank, 3)))
    taken.append(world.take_peaks())
    taken.append(world.take_peaks())
    cpu = World(rank, 2)  # on a CPU a rank sends no reading: nothing to report
    gathered.append(cpu.gather(("result", rank, 4)))
    taken.append(cpu.take_peaks())
    dist.destroy_process_group()
    results.put((rank, gathered, taken))


def test_each_rank_s_peak_memory_reaches_rank_zero_with_its_results(tmp_path: Path):
    context = multiprocessing.get_context("fork")
    results = context.Queue()
    ranks = [
        context.Process(target=_rank, args=(r, str(tmp_path / "store"), results)) for r in (0, 1)
    ]
    for process in ranks:
        process.start()
    got: dict[int, Any] = {}
    for _ in ranks:
        rank, gathered, taken = results.get(timeout=60)
        got[rank] = (gathered, taken)
    for process in ranks:
        process.join(timeout=30)
        assert process.exitcode == 0
    gathered, taken = got[0]
    assert gathered == [[("result", 0, i), ("result", 1, i)] for i in range(5)]
    # the most over the gathers since the previous take, then only what came after it
    assert taken == [{"memory/peak_gib/rank1": 2.0}, {"memory/peak_gib/rank1": 0.75}, {}, {}]
    assert got[1] == ([None] * 5, [{}, {}, {}, {}])


class _Store:
    """The launcher's store as the heartbeats use it (add, set, get), until closed: then every call
    fails, as when the launcher is gone, and the heartbeat threads end."""

    def __init__(self) -> None:
        self.values: dict[str, Any] = {}
        self.closed = False
        self.lock = threading.Lock()

    def add(self, key: str, amount: int) -> int:
        with self.lock:
            if self.closed:
                raise RuntimeError("store closed")
            self.values[key] = int(self.values.get(key, 0)) + amount
            return int(self.values[key])

    def set(self, key: str, value: str) -> None:
        self.values[key] = value

    def get(self, key: str) -> bytes:
        return str(self.values[key]).encode()


def test_a_rank_whose_heartbeat_stops_is_named_by_the_one_waiting_on_it(monkeypatch):
    """Rank 2 has no heartbeat (a stopped process's threads stop too), rank 1 beats: rank 0,
    waiting on both, hears of rank 2 alone once the limit (1 s) has passed, and `stopped` names
    it alone; the ranks' host and process id are in the store, for the kill. Beats come every
    0.25 s here (1 s in a run), so `stopped` watches for 0.75 s."""
    from kitchen.adapters.local.distributed import world

    monkeypatch.setattr(world, "BEAT_S", 0.25)
    store, silent = _Store(), []
    beats = Heartbeats(store, 0, 3, limit_s=1.0, silent=silent.append)
    Heartbeats(store, 1, 3, limit_s=1.0, silent=silent.append)
    try:
        with beats.watching([1, 2]):
            deadline = time.monotonic() + 20
            while not silent and time.monotonic() < deadline:
                time.sleep(0.1)
        assert set(silent) == {2}
        assert beats.stopped() == [2]
        assert beats.local_pid(1) == os.getpid() and beats.local_pid(2) is None
    finally:
        store.closed = True


class _Stalling:
    """A sharded base whose pass waits past the timeout, as gloo says it."""

    passes = 0

    def call(self) -> Any:
        import contextlib

        @contextlib.contextmanager
        def failing() -> Any:
            self.passes += 1
            raise RuntimeError("Timed out waiting 5000ms for send operation to complete")
            yield

        return failing()


def test_a_call_that_stalls_leaves_the_ranks_out_of_step_saying_why():
    import pytest

    from kitchen.adapters.local.distributed.world import StalledRank, World
    from kitchen.engine.errors import BackendError

    world, model = World(0, 2, timeout_s=5), object()
    world._sharded[id(model)] = _Stalling()  # type: ignore[assignment]
    with pytest.raises(StalledRank), world.sharded_call(model):
        pass
    assert world.broken
    assert world.failure == (
        "rank 0 of 2: a collective waited more than 5 s for the other ranks "
        "(KITCHEN_COLLECTIVE_TIMEOUT); one stopped answering, though every rank's heartbeat goes on"
    )
    with pytest.raises(BackendError, match="the ranks are out of step"), world.sharded_call(model):
        pass


def test_a_server_stops_once_its_ranks_are_out_of_step():
    """kitchen serve --nproc N: every call after one that broke the ranks' lockstep would fail, so
    the server stops (the command then exits 1 with the reason) instead of answering each so."""
    from types import SimpleNamespace

    from kitchen.adapters.local.distributed.world import World
    from kitchen.serve import _stop_when_out_of_step

    here = World(0, 2)
    server = SimpleNamespace(should_exit=False)
    broke = _stop_when_out_of_step(server, here)
    time.sleep(0.5)
    assert not server.should_exit and broke == []  # in step: the server goes on
    here._break(RuntimeError("rank 0 of 2: rank 1 stopped answering"))
    deadline = time.monotonic() + 5
    while not server.should_exit and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.should_exit
    assert broke == ["rank 0 of 2: rank 1 stopped answering"]
