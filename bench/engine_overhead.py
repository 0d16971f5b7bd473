"""Runner overhead per stage against a plain Python loop calling the same functions (same run).

    python bench/engine_overhead.py [--iterations 2000] [--stages 5]

Target: under 20 microseconds of overhead per stage call.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from kitchen.engine.graph import Loop, Workflow
from kitchen.engine.runner import execute
from kitchen.engine.stage import Context
from kitchen.engine.state import BaseState


class BenchState(BaseState):
    batch_idx: int = 0
    total: int = 0


def work(state: Any) -> dict[str, float]:
    state.total = state.total + state.batch_idx
    return {"total": state.total}


@dataclass(frozen=True)
class Work:
    name: str
    reads: frozenset[str] = frozenset({"batch_idx", "total"})
    writes: frozenset[str] = frozenset({"total"})

    def __call__(self, ctx: Any) -> dict[str, float]:
        return work(ctx.state)


def plain(iterations: int, stages: int) -> float:
    state = SimpleNamespace(batch_idx=0, total=0)
    metrics: dict[str, float] = {}
    t0 = time.perf_counter()
    for i in range(iterations):
        state.batch_idx = i
        for _ in range(stages):
            metrics.update(work(state))
    return time.perf_counter() - t0


def engine(iterations: int, stages: int) -> float:
    body = [Work(f"work{k}") for k in range(stages)]
    wf = Workflow("bench", BenchState, [Loop("batch", iterations, "batch_idx", body, steps=True)])
    t0 = time.perf_counter()
    execute(wf, Context(state=BenchState(step=0)))  # mypy reads no positional Field default
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--iterations", type=int, default=2000)
    parser.add_argument("--stages", type=int, default=5)
    args = parser.parse_args()
    engine(50, args.stages)  # warm up imports and caches
    base = min(plain(args.iterations, args.stages) for _ in range(3))
    ours = min(engine(args.iterations, args.stages) for _ in range(3))
    calls = args.iterations * args.stages
    overhead_us = (ours - base) / calls * 1e6
    print(f"stage calls:            {calls}")
    print(f"plain loop:             {base * 1e6 / calls:8.2f} us/call")
    print(f"kitchen runner:         {ours * 1e6 / calls:8.2f} us/call")
    print(f"overhead per stage:     {overhead_us:8.2f} us (target < 20)  ratio {ours / base:.1f}x")


if __name__ == "__main__":
    main()
