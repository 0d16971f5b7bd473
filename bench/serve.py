"""What the Tinker protocol costs: the official SDK -> `kitchen serve` against calling the local
engine in-process, same machine, same run, same model and batch.

    .venv/bin/python bench/serve.py                 # tiny model, about a minute
    .venv/bin/python bench/serve.py --calls 100 --pairs 16

1. Per-call overhead: one small forward_backward at a time (submit, wait), median over --calls,
   SDK through HTTP vs the engine's own client. Both sides run torch on 1 thread.
2. Pipelining: --pairs forward_backward + optim_step pairs submitted at once through the SDK,
   against the same number of pairs run back to back in-process (N "server steps"); the server's
   lane record gives the engine's idle time between requests (0 = no idle round trips).
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("TINKER_API_KEY", "tml-bench")
os.environ.setdefault("TINKER_TELEMETRY", "0")  # the SDK's own event uploads are not the protocol

import httpx
from tinker import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sft_batch import sft_batch

ADAM = types.AdamParams(learning_rate=1e-4)


def timed(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def per_call(
    remote: Any, local: Any, data: list[types.Datum], calls: int
) -> tuple[list[float], list[float]]:
    """Seconds of one forward_backward submitted and awaited alone, remote and local alternating
    so that load from elsewhere on the machine hits both alike."""
    for client in (remote, local, remote, local):
        client.forward_backward(data, "cross_entropy").result()
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(calls):
        for client, out in ((remote, times[0]), (local, times[1])):
            out.append(timed(partial(_forward_backward, client, data)))
    return times


def _forward_backward(client: Any, data: list[types.Datum]) -> object:
    return client.forward_backward(data, "cross_entropy").result()


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process (Linux /proc)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_per_call(
    client: Any, data: list[types.Datum], calls: int, server_pid: int | None
) -> tuple[float, float]:
    """CPU seconds per forward_backward: this process (SDK or engine), and the server if any.
    CPU time, unlike wall time, does not grow when other work shares the machine."""
    server0 = cpu_seconds(server_pid) if server_pid else 0.0
    start = time.process_time()
    for _ in range(calls):
        client.forward_backward(data, "cross_entropy").result()
    here = (time.process_time() - start) / calls
    server = (cpu_seconds(server_pid) - server0) / calls if server_pid else 0.0
    return here, server


def pairs_back_to_back(client: Any, data: list[types.Datum], pairs: int) -> float:
    def run() -> None:
        for _ in range(pairs):
            client.forward_backward(data, "cross_entropy").result()
            client.optim_step(ADAM).result()

    return timed(run)


def pairs_pipelined(client: Any, data: list[types.Datum], pairs: int) -> float:
    def run() -> None:
        futures = []
        for _ in range(pairs):
            futures.append(client.forward_backward(data, "cross_entropy"))
            futures.append(client.optim_step(ADAM))
        for f in futures:
            f.result()

    return timed(run)


def start_server(port: int, model: str, checkpoints: str) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "kitchen.app.cli", "serve", "--port", str(port), "--model", model]
    proc = subprocess.Popen(
        [*cmd, "--checkpoint-dir", checkpoints, "--threads", "1"], stderr=subprocess.DEVNULL
    )
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/api/v1/healthz", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            time.sleep(0.2)
    proc.kill()
    raise SystemExit("kitchen serve did not start")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="kitchen/tiny-llama")
    parser.add_argument("--calls", type=int, default=50, help="forward_backward calls to time")
    parser.add_argument("--pairs", type=int, default=8, help="pipelined fwd/bwd + optim pairs")
    parser.add_argument("--pipeline-batch", type=int, default=8, help="datums per pipelined step")
    args = parser.parse_args()

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    checkpoints = tempfile.mkdtemp(prefix="kitchen-bench-serve-")
    proc = start_server(port, args.model, checkpoints)
    small, big = sft_batch(1, 16, 0), sft_batch(args.pipeline_batch, 64, 1)
    try:
        import tinker
        import torch

        from kitchen.adapters.local import create_local_backend
        from kitchen.ports import BackendSettings

        torch.set_num_threads(1)
        backend = create_local_backend(BackendSettings(extra={"num_threads": 1}))
        local = backend.create_lora_training_client(args.model, rank=8, seed=0)
        service = tinker.ServiceClient(base_url=url)
        remote = service.create_lora_training_client(args.model, rank=8, seed=0).result()

        sdk_calls, local_calls = per_call(remote, local, small, args.calls)
        lane = httpx.get(f"{url}/kitchen/v1/lanes/{remote.model_id}", timeout=10).json()
        engine = [e["finished_at"] - e["dispatched_at"] for e in lane["events"][-args.calls :]]
        sdk_cpu, server_cpu = cpu_per_call(remote, small, args.calls, proc.pid)
        local_cpu, _ = cpu_per_call(local, small, args.calls, None)
        # Best of 3 each, interleaved: outside load only ever slows a run down.
        runs: dict[str, list[float]] = {"local": [], "serial": [], "piped": []}
        for _ in range(3):
            runs["local"].append(pairs_back_to_back(local, big, args.pairs))
            runs["serial"].append(pairs_back_to_back(remote, big, args.pairs))
            runs["piped"].append(pairs_pipelined(remote, big, args.pairs))
        lane = httpx.get(f"{url}/kitchen/v1/lanes/{remote.model_id}", timeout=10).json()
        gaps = lane["idle_gaps_s"][-(2 * args.pairs - 1) :]
        last = lane["events"][-2 * args.pairs :]
        span = last[-1]["finished_at"] - last[0]["dispatched_at"]
        service.close("success").result()
        backend.close()
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)

    med = statistics.median
    overhead = [c - e for c, e in zip(sdk_calls, engine, strict=True)]
    local_s, serial_s, piped_s = (min(runs[k]) for k in ("local", "serial", "piped"))
    n, b = args.pairs, args.pipeline_batch
    print(
        f"model {args.model}; torch threads 1 on both sides; {os.cpu_count()} CPUs; load {os.getloadavg()[0]:.1f}\n"
    )
    print(f"1. one forward_backward (1 x 16 tokens), median of {args.calls}, alternating")
    print(f"   in-process engine           {med(local_calls) * 1e3:8.2f} ms")
    print(f"   SDK -> kitchen serve        {med(sdk_calls) * 1e3:8.2f} ms")
    print(f"   difference                  {(med(sdk_calls) - med(local_calls)) * 1e3:8.2f} ms")
    print(
        f"   SDK time - server engine    {med(overhead) * 1e3:8.2f} ms per call (protocol overhead; "
        f"p10 {statistics.quantiles(overhead, n=10)[0] * 1e3:.2f} ms)"
    )
    protocol_cpu = sdk_cpu + server_cpu - local_cpu
    print(
        f"   CPU per call: SDK {sdk_cpu * 1e3:.2f} + server {server_cpu * 1e3:.2f} ms, engine alone "
        f"{local_cpu * 1e3:.2f} ms -> protocol CPU {protocol_cpu * 1e3:.2f} ms per call\n"
    )
    print(f"2. {n} forward_backward + optim_step pairs ({b} x 64 tokens each), best of 3")
    print(f"   in-process, back to back    {local_s:8.3f} s  ({local_s / n * 1e3:.1f} ms/step)")
    print(f"   SDK, await each request     {serial_s:8.3f} s  ({serial_s / n * 1e3:.1f} ms/step)")
    print(f"   SDK, all submitted first    {piped_s:8.3f} s  ({piped_s / n * 1e3:.1f} ms/step)")
    print(f"   pipelined / in-process      {piped_s / local_s:8.2f} x  (1.00 = N server steps)")
    print(
        f"   engine idle between the last {len(gaps) + 1} pipelined requests: "
        f"{sum(gaps) * 1e3:.2f} ms total, max {max(gaps, default=0) * 1e3:.2f} ms"
    )
    print(
        f"   last pipelined run: {runs['piped'][-1]:.3f} s at the client; on the server "
        f"{span:.3f} s from first dispatch to last result, engine busy {(span - sum(gaps)) / span:.0%}"
    )


if __name__ == "__main__":
    main()
