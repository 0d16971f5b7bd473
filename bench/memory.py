"""Peak memory and tokens/s of a training step against sequence length, for each memory lever.

    .venv/bin/python bench/memory.py                              # SmolLM2-135M, 1k..8k, every mode
    .venv/bin/python bench/memory.py --lengths 1024,8192 --modes off,checkpointing
    .venv/bin/python bench/memory.py --size 1b --device cuda --lengths 8192,16384,32768

A mode is a pair of engine settings:
    off            activation checkpointing off, micro-batches padded to their longest row
    checkpointing  --activation-checkpointing on
    packing        --packing on: rows packed end to end, attention confined per row
    both           checkpointing and packing

The data of one length L: a batch of rows of L, L/2, L/4 and L/4 random token ids (the mixed
lengths an SFT batch has; --single: one row of L), trained with cross_entropy on every position under LoRA rank 32, in
micro-batches of at most 2L tokens (so the longest row and the next share one pass). Each (mode,
length) runs in a fresh process: the model is loaded, then the peak is reset (Linux clear_refs) and
--steps forward_backward + optim_step run. Printed per row: the growth of peak RSS over the
resident size before the first step (the CPU's measure; on CUDA, torch's peak allocated memory
over what was allocated before), the engine's own estimate of the activations
(kitchen/adapters/local/train/memory.py), real tokens per second of the last step, the padding
fraction, and the step's loss (equal across modes: the levers do not change the numerics).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# glibc serves mid-sized blocks from its heap and keeps them resident after free, so the peak RSS
# of a pass would count memory the pass no longer uses; from mmap, a freed block leaves RSS at once.
os.environ.setdefault("MALLOC_MMAP_THRESHOLD_", "65536")

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from model_options import add_model_options, resolve_model_options  # noqa: E402
from sides import emit, machine, peak_rss_kb, run_side, side_or_parent  # noqa: E402

MODES = {
    "off": {"activation_checkpointing": "off", "packing": "off"},
    "checkpointing": {"activation_checkpointing": "on", "packing": "off"},
    "packing": {"activation_checkpointing": "off", "packing": "on"},
    "both": {"activation_checkpointing": "on", "packing": "on"},
}


def row_lengths(length: int, single: bool = False) -> list[int]:
    return [length] if single else [length, length // 2, length // 4, length // 4]


def batch(length: int, vocab: int, single: bool, seed: int = 0) -> list[Any]:
    from tinker import types

    rng = np.random.default_rng(seed)
    data = []
    for n in row_lengths(length, single):
        tokens = rng.integers(3, vocab, size=n + 1)
        data.append(
            types.Datum(
                model_input=types.ModelInput.from_ints(tokens[:-1].tolist()),
                loss_fn_inputs={
                    "target_tokens": types.TensorData.from_numpy(tokens[1:].astype(np.int64)),
                    "weights": types.TensorData.from_numpy(np.ones(n, dtype=np.float32)),
                },
            )
        )
    return data


def resident_kb(field: str = "VmRSS") -> int:
    """A size from /proc/self/status in KiB: the resident size, or another (RssAnon: its anonymous
    part)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    return 0


def reset_peak() -> None:
    """Linux: VmHWM (peak RSS) starts again from the resident size now."""
    Path("/proc/self/clear_refs").write_text("5")


def train_steps(
    client: Any, data: list[Any], steps: int
) -> tuple[list[float], float, dict[str, float], float]:
    """`steps` forward_backward + optim_step (learning rate 0) on `data`: their seconds, the last
    loss and optim_step metrics, and the peak memory the steps added, in GB (RSS growth over the
    resident size before them; on CUDA, torch's peak allocated over what was allocated before)."""
    import torch
    from tinker import types

    device = client.host.device
    cuda = device.type == "cuda"
    before_kb = resident_kb()
    reset_peak()
    seconds: list[float] = []
    metrics: dict[str, float] = {}
    loss, cuda_peak = 0.0, 0
    for _ in range(steps):
        start = time.perf_counter()
        # The engine resets CUDA's peak at every optim_step (its memory/peak_gib), so the pass's
        # peak is read between the two calls, over what was allocated before the pass.
        allocated = torch.cuda.memory_allocated(device) if cuda else 0
        out = client.forward_backward(data, "cross_entropy").result()
        if cuda:
            cuda_peak = max(cuda_peak, torch.cuda.max_memory_allocated(device) - allocated)
        step = client.optim_step(types.AdamParams(learning_rate=0.0)).result()
        seconds.append(time.perf_counter() - start)
        loss, metrics = out.metrics["loss:sum"], step.metrics or {}
    peak_gb = cuda_peak / 2**30 if cuda else (peak_rss_kb() - before_kb) / 2**20
    return seconds, loss, metrics, peak_gb


def side(args: argparse.Namespace) -> None:
    from kitchen.adapters.local import create_local_backend
    from kitchen.adapters.local.train.memory import activation_bytes
    from kitchen.ports import BackendSettings

    length = args.side_length
    settings = BackendSettings(
        log_dir=Path(tempfile.mkdtemp(prefix="bench-memory-")),
        seed=0,
        device=args.device,
        dtype=args.dtype,
        extra={**MODES[args.side], "microbatch_tokens": 2 * length},
    )
    backend = create_local_backend(settings)
    client = backend.create_lora_training_client(args.model, rank=32, seed=0)
    host = client.host
    data = batch(length, host.vocab_size, args.single)
    seconds, loss, metrics, peak_gb = train_steps(client, data, args.steps)
    compute = 2 if backend.dtype_name != "float32" else 4
    checkpointed = MODES[args.side]["activation_checkpointing"] == "on"
    pass_tokens = length if args.single else 2 * length
    estimate = activation_bytes(host.base.config, pass_tokens, compute, checkpointed) / 2**30
    real = sum(row_lengths(length, args.single))
    backend.close()
    emit(
        {
            "peak_gb": peak_gb,
            "estimate_gb": estimate,
            "tokens_per_s": real / seconds[-1],
            "seconds": seconds,
            "loss": loss,
            "padding_fraction": metrics.get("train/padding_fraction", float("nan")),
            "dtype": backend.dtype_name,
            "device": str(host.device),
        }
    )


def sft_batches(steps: int, model: str) -> list[list[Any]]:
    """The first `steps` training batches of `kitchen run sl_basic` (the bundled SFT data, the
    model's chat template), as its workflow hands them to forward_backward (no held-out split:
    its evaluation and samples would only cost time)."""
    from kitchen.adapters.local.clients.training_client import LocalTrainingClient
    from kitchen.app.launch import run

    seen: list[list[Any]] = []
    original = LocalTrainingClient.forward_backward

    def recording(self: Any, data: Any, *args: Any, **kwargs: Any) -> Any:
        seen.append(list(data))
        return original(self, data, *args, **kwargs)

    LocalTrainingClient.forward_backward = recording  # type: ignore[method-assign]
    try:
        run(
            "sl_basic",
            config={
                "model_name": model,
                "eval_every": 0,
                "save_every": 0,
                "dtype": "float32",
                "test_dataset": None,
            },
            log_dir=tempfile.mkdtemp(prefix="bench-memory-sft-"),
            max_steps=steps,
        )
    finally:
        LocalTrainingClient.forward_backward = original  # type: ignore[method-assign]
    return seen


def pass_work(config: Any, batches: list[Any]) -> tuple[int, float]:
    """(decoder positions, estimated FLOPs) of the passes `batches` (planned micro-batches) make,
    forward and backward, with attention as the engine runs it: causal over each padded row, per
    datum in a packed row. What a step costs, without a clock."""
    from kitchen.adapters.local.train.memory import layer_widths

    layers, hidden, intermediate, qkv = layer_widths(config)
    heads = int(config.num_attention_heads)
    head_dim = int(getattr(config, "head_dim", None) or hidden // heads)
    # Per position: every layer's projections and MLP, and the vocabulary head (2 FLOPs a weight).
    per_position = 2 * (
        layers * (hidden * qkv + heads * head_dim * hidden + 3 * hidden * intermediate)
    )
    per_position += 2 * hidden * int(config.vocab_size)
    positions, pairs = 0, 0
    for mb in batches:
        rows, width = mb.host_tokens.shape
        positions += rows * width
        spans = mb.lengths if mb.position_ids is not None else [width] * rows
        pairs += sum(n * (n + 1) // 2 for n in spans)
    per_pair = layers * 4 * heads * head_dim  # q.k and the weighted sum of v
    return positions, 3.0 * (positions * per_position + pairs * per_pair)  # backward ~2x forward


def compare_packing(args: argparse.Namespace) -> None:
    """Padded against packed forward_backward on sl_basic's batches, alternating batch by batch in
    one process, so both see the same machine load. Printed: the decoder positions and estimated
    FLOPs of each layout (no clock), the process's CPU seconds (time other processes take on the
    cores is not counted, but what they do to caches and clocks is) and wall seconds."""
    from kitchen.adapters.local import create_local_backend
    from kitchen.adapters.local.train.batching import TARGETS_ONLY, BatchTarget, plan_microbatches
    from kitchen.ports import BackendSettings

    batches = sft_batches(args.sft_steps, args.model)
    clients = {}
    for packing in ("off", "on"):
        settings = BackendSettings(
            log_dir=Path(tempfile.mkdtemp(prefix="bench-memory-")),
            device=args.device,
            dtype=args.dtype,
            extra={"packing": packing, "activation_checkpointing": "off"},
        )
        backend = create_local_backend(settings)
        clients[packing] = backend.create_lora_training_client(args.model, rank=32, seed=0)
    host = clients["off"].host
    budget = backend.settings.microbatch_tokens
    wall = {"off": 0.0, "on": 0.0}
    cpu = {"off": 0.0, "on": 0.0}
    positions = {"off": 0, "on": 0}  # decoder positions, and estimated FLOPs, of batches 1..
    flops = {"off": 0.0, "on": 0.0}
    tokens = sum(len(d.model_input.to_ints()) for data in batches[1:] for d in data)
    print(f"model {args.model} on {host.device}, dtype {args.dtype}; micro-batches of {budget}")
    for step, data in enumerate(batches):
        losses = {}
        for packing, client in clients.items():
            plan = plan_microbatches(
                data, TARGETS_ONLY, budget, BatchTarget("cpu"), packed=packing == "on"
            )
            work = pass_work(host.base.config, plan)
            start, start_cpu = time.perf_counter(), time.process_time()
            losses[packing] = client.forward_backward(data, "cross_entropy").result().metrics
            if step:  # the first batch warms both up
                wall[packing] += time.perf_counter() - start
                cpu[packing] += time.process_time() - start_cpu
                positions[packing] += work[0]
                flops[packing] += work[1]
        padding = clients["off"].optim_step(_no_update()).result().metrics or {}
        clients["on"].optim_step(_no_update()).result()
        print(
            f"batch {step}: loss padded {losses['off']['loss:sum']:.4f} packed "
            f"{losses['on']['loss:sum']:.4f}; padding {padding['train/padding_fraction']:.2f}",
            flush=True,
        )
    print(f"{'':7s} {'positions':>9s} {'TFLOP':>6s} {'tok/cpu-s':>9s} {'tok/s':>6s}  (batches 1..)")
    for packing, label in (("off", "padded"), ("on", "packed")):
        print(
            f"{label:7s} {positions[packing]:9d} {flops[packing] / 1e12:6.2f} "
            f"{tokens / cpu[packing]:9.1f} "
            f"{tokens / wall[packing]:6.1f}"
        )
    work_ratio = {
        "positions": positions["off"] / positions["on"],
        "FLOPs": flops["off"] / flops["on"],
    }
    speed = {"CPU time": cpu["off"] / cpu["on"], "wall time": wall["off"] / wall["on"]}
    print("padded / packed work: " + ", ".join(f"{k} {v:.2f}x" for k, v in work_ratio.items()))
    print("packed / padded tokens/s: " + ", ".join(f"{k} {v:.2f}x" for k, v in speed.items()))
    print(f"{machine()}")


def _no_update() -> Any:
    from tinker import types

    return types.AdamParams(learning_rate=0.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_model_options(parser, default_model="smollm2-135m")
    parser.add_argument("--lengths", default="1024,2048,4096,8192")
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--steps", type=int, default=1)
    parser.add_argument("--dtype", default="float32", help="auto | float32 | bfloat16")
    parser.add_argument("--single", action="store_true", help="one row of L tokens per batch")
    parser.add_argument(
        "--sft-steps",
        type=int,
        default=0,
        help="instead: padded against packed tokens/s on this many sl_basic batches",
    )
    parser.add_argument("--side-length", type=int, help=argparse.SUPPRESS)
    args = side_or_parent(parser, sorted(MODES), side)
    if args is None:
        return
    resolve_model_options(args)
    if args.sft_steps:
        compare_packing(args)
        return
    print(f"model {args.model} on {args.device}, dtype {args.dtype}; {machine()}")
    rows = "L" if args.single else "L, L/2, L/4, L/4"
    print(f"rows per batch: {rows}; micro-batches of at most 2L tokens; LoRA rank 32")
    head = f"{'L':>6s} {'mode':14s} {'peak GB':>8s} {'est. GB':>8s} {'tok/s':>7s} {'pad':>5s} {'loss':>12s}"
    print(head)
    argv = ["--model", args.model, "--device", args.device, "--dtype", args.dtype]
    argv += ["--steps", str(args.steps), *(["--single"] if args.single else [])]
    for length in (int(x) for x in args.lengths.split(",")):
        for mode in args.modes.split(","):
            r = run_side(__file__, mode, [*argv, "--side-length", str(length)])
            print(
                f"{length:6d} {mode:14s} {r['peak_gb']:8.2f} {r['estimate_gb']:8.2f} "
                f"{r['tokens_per_s']:7.0f} {r['padding_fraction']:5.2f} {r['loss']:12.4f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
