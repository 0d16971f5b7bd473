"""`kitchen serve` under load: N official-SDK clients (default 8), each its own session, train and
sample at once on loopback for a bounded time; then each client runs alone for as many steps, and
its losses must equal the loaded run's (no cross-talk between sessions).

    .venv/bin/python bench/serve_load.py                      # 8 clients, 20 s, tiny model
    .venv/bin/python bench/serve_load.py --clients 16 --seconds 60

Prints requests/s over the loaded window and p50/p99 latency (submit -> result) of every SDK
request: forward_backward, optim_step, save_weights_and_get_sampling_client, sample. The server
runs in this process (uvicorn in a thread, torch on 1 thread); tests/serve_hardening/test_load.py
runs the same workload, shorter.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("TINKER_TELEMETRY", "0")

import numpy as np
from tinker import types

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sft_batch import sft_batch

TINY = "kitchen/tiny-llama"
KEY = "tml-serve-load"
ADAM = types.AdamParams(learning_rate=1e-2)


@dataclass
class ClientRun:
    """What one client saw: its loss per step, each request's latency, the errors it got."""

    losses: list[float] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def _timed(run: ClientRun, future: Any) -> Any:
    start = time.perf_counter()
    result = future.result()
    run.latencies.append(time.perf_counter() - start)
    return result


def client_workload(
    url: str,
    seed: int,
    *,
    steps: int | None = None,
    seconds: float | None = None,
    api_key: str = KEY,
) -> ClientRun:
    """One SDK client: a LoRA model of its own; per step a forward_backward, an optim_step, a
    sampler on the new weights and one seeded sample from it; until `steps` or `seconds`."""
    import tinker

    run = ClientRun()
    service = tinker.ServiceClient(base_url=url, api_key=api_key)
    try:
        client = service.create_lora_training_client(TINY, rank=4, seed=seed).result()
        data = sft_batch(2, 24, seed, max_token=200)
        params = types.SamplingParams(max_tokens=4, temperature=1.0, seed=seed)
        deadline = time.monotonic() + seconds if seconds is not None else None
        while (steps is None or len(run.losses) < steps) and (
            deadline is None or time.monotonic() < deadline
        ):
            start = time.perf_counter()
            fb = client.forward_backward(data, "cross_entropy")
            optim = client.optim_step(ADAM)
            run.losses.append(float(fb.result().metrics["loss:sum"]))
            run.latencies.append(time.perf_counter() - start)
            _timed(run, optim)
            sampler = _timed(run, client.save_weights_and_get_sampling_client())
            _timed(run, sampler.sample(data[0].model_input, 1, params))
    except Exception as e:  # a failed request: counted, reported, never silent
        run.errors.append(f"client {seed}: {type(e).__name__}: {e}")
    finally:
        service.close("success").result()
    return run


def concurrently(clients: int, workload: Callable[[int], ClientRun]) -> list[ClientRun]:
    """`workload(i)` for clients i = 0..clients-1 at once, one thread each."""
    with ThreadPoolExecutor(clients) as pool:
        return list(pool.map(workload, range(clients)))


def main() -> None:
    import tempfile

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=20.0)
    args = parser.parse_args()
    from kitchen.serve import ServeSettings, serving

    with tempfile.TemporaryDirectory() as tmp:
        settings = ServeSettings(
            port=0, require_key=True, api_key=KEY, checkpoint_dir=Path(tmp), preload=[TINY]
        )
        with serving(settings) as url:
            runs, wall, errors, mismatched = _measure(url, args.clients, args.seconds)
    latencies = np.array([x for r in runs for x in r.latencies])
    print(f"{args.clients} clients, {wall:.1f} s: {len(latencies)} requests, "
          f"{len(latencies) / wall:.1f} requests/s, p50 {np.percentile(latencies, 50) * 1e3:.1f} ms, "
          f"p99 {np.percentile(latencies, 99) * 1e3:.1f} ms")  # fmt: skip
    print(f"steps per client: {[len(r.losses) for r in runs]}")
    print(
        f"failed requests: {len(errors)}; clients whose losses differ from their solo run: {mismatched}"
    )
    for e in errors[:5]:
        print("  ", e)


def _measure(
    url: str, clients: int, seconds: float
) -> tuple[list[ClientRun], float, list[str], int]:
    """The loaded window, then each client alone for as many steps as it took in it."""
    start = time.perf_counter()
    runs = concurrently(clients, partial(client_workload, url, seconds=seconds))
    wall = time.perf_counter() - start
    errors = [e for r in runs for e in r.errors]
    mismatched = 0
    for i, r in enumerate(runs):
        solo = client_workload(url, i, steps=len(r.losses))
        mismatched += solo.losses != r.losses
        errors += solo.errors
    return runs, wall, errors, mismatched


if __name__ == "__main__":
    main()
