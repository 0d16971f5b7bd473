"""World.gather on two gloo processes forked from this one: each rank > 0's accelerator peak memory
travels with its results to rank 0, which reports it at its next optim_step
(`memory/peak_gib/rank1`). The CUDA counter is read through memory.peak_gib, which a stand-in
replaces here (this CPU has none)."""

import multiprocessing
from pathlib import Path
from typing import Any

import torch.distributed  # noqa: F401  (imported once, here, for both forked ranks)

# A rank > 0's readings at its gathers, in GiB: the stand-in hands them out in turn.
READINGS = [0.5, 2.0, 1.25, 0.75]


def _rank(rank: int, store: str, results: Any) -> None:
    import torch.distributed as dist

    from kitchen.adapters.local import memory
    from kitchen.adapters.local.distributed.world import World

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
