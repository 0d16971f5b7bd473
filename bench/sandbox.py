"""Sandbox throughput: executions per second of a trivial program with every core busy, against a
bare `python -c` subprocess of the same interpreter, measured in the same run.

    .venv/bin/python bench/sandbox.py [--seconds 5] [--workers N]

Each of N workers (default: one per core) runs the program back to back for the given time;
the sandbox runs go through LocalSandbox with max_concurrency=N.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import threading
import time
from collections.abc import Callable

from kitchen.adapters.sandbox.jail import default_python
from kitchen.adapters.sandbox.local import LocalSandbox

PROGRAM = "print(1)"


def throughput(run_once: Callable[[], None], workers: int, seconds: float) -> tuple[float, float]:
    """Executions per second with `workers` threads each calling run_once until time is up, and
    CPU milliseconds per execution (children plus this process: spawning and supervising), which
    other load on the machine disturbs far less than the rate."""
    counts = [0] * workers
    stop = time.monotonic() + seconds

    def worker(slot: int) -> None:
        while time.monotonic() < stop:
            run_once()
            counts[slot] += 1

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(workers)]
    cpu0 = _cpu_s()
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - t0
    n = sum(counts)
    return n / elapsed, 1000 * (_cpu_s() - cpu0) / n


def _cpu_s() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="time per measurement")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="parallel runs")
    args = parser.parse_args()

    python = default_python()
    sandbox = LocalSandbox(python=python, max_concurrency=args.workers)
    sandbox.check()  # start-up probe outside the measurement

    def bare() -> None:
        out = subprocess.run([python, "-c", PROGRAM], capture_output=True, check=True).stdout
        assert out == b"1\n"

    def sandboxed() -> None:
        result = sandbox.run(PROGRAM)
        assert result.reason == "ok" and result.stdout == "1\n", result

    bare_rate, bare_cpu_ms = throughput(bare, args.workers, args.seconds)
    sandbox_rate, sandbox_cpu_ms = throughput(sandboxed, args.workers, args.seconds)
    sandbox.close()
    # Per-execution latency on one worker, from the rates: workers / rate.
    bare_ms = 1000 * args.workers / bare_rate
    sandbox_ms = 1000 * args.workers / sandbox_rate
    print(f"workers: {args.workers} (cores: {os.cpu_count()}), interpreter: {python}")
    print(
        f"bare python -c: {bare_rate:7.1f} exec/s  {bare_ms:6.1f} ms each  {bare_cpu_ms:5.1f} ms CPU"
    )
    print(
        f"local sandbox:  {sandbox_rate:7.1f} exec/s  {sandbox_ms:6.1f} ms each  "
        f"{sandbox_cpu_ms:5.1f} ms CPU"
    )
    print(
        f"overhead: {sandbox_ms - bare_ms:+.1f} ms per execution; "
        f"sandbox/bare time ratio {sandbox_ms / bare_ms:.2f}x"
    )
    print(
        json.dumps(
            {
                "workers": args.workers,
                "bare_exec_per_s": round(bare_rate, 2),
                "sandbox_exec_per_s": round(sandbox_rate, 2),
                "overhead_ms": round(sandbox_ms - bare_ms, 2),
                "ratio": round(sandbox_ms / bare_ms, 3),
                "bare_cpu_ms": round(bare_cpu_ms, 2),
                "sandbox_cpu_ms": round(sandbox_cpu_ms, 2),
            }
        )
    )


if __name__ == "__main__":
    main()
