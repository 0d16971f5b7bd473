"""Sampling tokens/s of vLLM (`--sampler vllm`) against the local engine's sampler, in one run
(issue 35): 8, 32 and 128 concurrent requests, on the base model and on a LoRA snapshot, with
vLLM's start-up time and memory.

    .venv/bin/python bench/vllm_sampler.py                     # SmolLM2-135M; needs `make vllm`
    .venv/bin/python bench/vllm_sampler.py --model kitchen/tiny-llama --concurrency 8,32 --max-tokens 32
    .venv/bin/python bench/vllm_sampler.py --vllm-url http://127.0.0.1:8000   # a server you run

Each row submits N requests at once (one sample each, a distinct 32-token prompt, stop=[] so every
one runs to --max-tokens) and times until the last answer: tokens/s = N x max_tokens / seconds.
The LoRA snapshot has nonzero B matrices (rank --lora-rank on every module), so it really runs.
Memory: the peak RSS of this process (the trainer and the local sampler) and the RSS of the vLLM
process group when its rows are done. Other work on the machine slows both samplers: note the
load average it prints, and compare rows of one run only.
"""

from __future__ import annotations

import argparse
import os
import resource
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def group_rss_gib(pgid: int) -> float:
    """Resident memory of every process in process group `pgid` (vLLM and its engine)."""
    total = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            if int(stat[2]) != pgid:
                continue
            for line in (entry / "status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
        except (OSError, IndexError, ValueError):
            continue
    return total / 2**30


def samplers(backend: Any, model: str, rank: int) -> dict[str, Any]:
    import torch

    client = backend.create_lora_training_client(model, rank=rank, seed=0)
    with torch.no_grad():
        for name, p in client.host.model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.02)
    return {
        "base": backend.create_sampling_client(base_model=model),
        "lora": client.save_weights_and_get_sampling_client(),
    }


def rate(sampler: Any, concurrency: int, max_tokens: int, vocab: int) -> float:
    from tinker import types

    params = types.SamplingParams(max_tokens=max_tokens, temperature=1.0, stop=[])
    prompts = [
        types.ModelInput.from_ints([(17 * i + j) % (vocab - 10) + 5 for j in range(32)])
        for i in range(concurrency)
    ]
    started = time.perf_counter()
    futures = [sampler.sample(p, 1, params) for p in prompts]
    tokens = sum(len(f.result().sequences[0].tokens) for f in futures)
    return tokens / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--concurrency", default="8,32,128")
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--lora-rank", type=int, default=16)
    parser.add_argument("--vllm-url", action="append", default=[])
    parser.add_argument("--start-timeout", type=float, default=900)
    args = parser.parse_args()
    levels = [int(c) for c in args.concurrency.split(",")]

    from kitchen.adapters.local.backend import LocalBackend
    from kitchen.adapters.samplers import remote_samplers
    from kitchen.ports import BackendSettings

    print(f"load average at start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    rows: list[tuple[str, str, int, float]] = []
    for kind in ("local", "vllm"):
        extra: dict[str, Any] = {"sampler": kind, "vllm_start_timeout": args.start_timeout}
        if args.vllm_url:
            extra["vllm_urls"] = args.vllm_url
        backend = LocalBackend(BackendSettings(seed=0, extra=extra), remote_samplers(extra))
        try:
            started = time.perf_counter()
            on = samplers(backend, args.model, args.lora_rank)
            if kind == "vllm":
                bases = backend.remote()._bases  # type: ignore[attr-defined]
                server = next(iter(bases.values())).started
                ready = server.ready_after_s if server else None
                print(
                    f"vllm: start-up {ready if ready is not None else float('nan'):.0f} s "
                    f"(clients ready after {time.perf_counter() - started:.0f} s)"
                )
            vocab = on["base"].vocab_size if kind == "vllm" else on["base"].host.vocab_size
            for weights, sampler in on.items():
                rate(sampler, 2, 4, vocab)  # warm-up: first-call costs stay out of the rows
                for n in levels:
                    tps = rate(sampler, n, args.max_tokens, vocab)
                    rows.append((kind, weights, n, tps))
                    print(f"{kind:6} {weights:5} {n:4} concurrent: {tps:8.1f} tok/s", flush=True)
            if kind == "vllm" and server is not None and server.proc is not None:
                print(f"vllm: process group RSS {group_rss_gib(server.proc.pid):.2f} GiB")
        finally:
            backend.close()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    print(f"this process (trainer + local sampler): peak RSS {peak:.2f} GiB")
    print(f"load average at end: {os.getloadavg()[0]:.1f}")
    print("\n| weights | concurrent | local tok/s | vLLM tok/s | vLLM / local |")
    print("|---|---|---|---|---|")
    table = {(k, w, n): t for k, w, n, t in rows}
    for weights in ("base", "lora"):
        for n in levels:
            local, vllm = table[("local", weights, n)], table[("vllm", weights, n)]
            print(f"| {weights} | {n} | {local:.0f} | {vllm:.0f} | {vllm / local:.2f}x |")


if __name__ == "__main__":
    main()
