"""What a 4-bit base (`--base-quantization nf4`) saves and costs against the fp32 base, under LoRA.

    .venv/bin/python bench/quantized_base.py                        # SmolLM2-135M, CPU, fp32
    .venv/bin/python bench/quantized_base.py --size 1b --device cuda --length 4096

Each base runs in a fresh process: the engine loads the model and creates a LoRA client (rank 32),
then --steps forward_backward + optim_step run on one batch of rows of L, L/2, L/4 and L/4 random
token ids (bench/memory.py's data). Printed per base: the bytes the base's weights take (every
parameter and buffer, plus the 4-bit layers' block scales: what quantization changes, independent
of the machine's load); the process's peak RSS; its peak anonymous RSS (sampled every 10 ms), which
leaves out the weight file's pages: transformers maps an fp32 checkpoint and computes on the mapped
pages, while a 4-bit load reads them once to quantize, and they stay counted in RSS, reclaimable,
until the kernel needs them; on CUDA, torch's peak allocated memory instead; tokens per second of
the last step, and its loss (close, not equal: the 4-bit weights are rounded).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

# Importing bench/memory.py also sets its environment for the sides: offline, and glibc's mmap
# threshold, so a freed mid-sized block leaves RSS and a peak counts what a pass holds.
from memory import batch, resident_kb, train_steps  # noqa: E402
from model_options import add_model_options, resolve_model_options  # noqa: E402
from sides import emit, machine, run_side, side_or_parent  # noqa: E402

BASES = ("none", "nf4")


def weight_bytes(model: Any) -> int:
    """Bytes of every parameter and buffer of `model`, and of its 4-bit layers' block scales."""
    tensors = {id(t): t for t in (*model.parameters(), *model.buffers())}  # tied ones once
    total = sum(t.numel() * t.element_size() for t in tensors.values())
    for module in model.modules():
        state = getattr(getattr(module, "weight", None), "quant_state", None)
        if state is not None:
            total += state.absmax.numel() * state.absmax.element_size()
    return total


class AnonPeak:
    """The most anonymous RSS seen while it runs, sampled by a thread every 10 ms."""

    def __init__(self) -> None:
        self.peak_kb = resident_kb("RssAnon")
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._stop.wait(0.01):
            self.peak_kb = max(self.peak_kb, resident_kb("RssAnon"))

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return max(self.peak_kb, resident_kb("RssAnon"))


def side(args: argparse.Namespace) -> None:
    from kitchen.adapters.local import create_local_backend
    from kitchen.ports import BackendSettings

    settings = BackendSettings(
        log_dir=Path(tempfile.mkdtemp(prefix="bench-quantized-")),
        seed=0,
        device=args.device,
        dtype=args.dtype,
        extra={"base_quantization": args.side, "microbatch_tokens": 2 * args.length},
    )
    anon = AnonPeak()
    backend = create_local_backend(settings)
    client = backend.create_lora_training_client(args.model, rank=32, seed=0)
    host = client.host
    data = batch(args.length, host.vocab_size, single=False)
    seconds, loss, _, step_peak = train_steps(client, data, args.steps)
    result = {
        "weights_gb": weight_bytes(host.base) / 2**30,
        "anon_peak_gb": anon.stop() / 2**20,
        "cuda_step_peak_gb": step_peak if host.device.type == "cuda" else None,
        "tokens_per_s": (args.length * 2) / seconds[-1],  # L + L/2 + L/4 + L/4
        "seconds": seconds,
        "loss": loss,
        "dtype": backend.dtype_name,
    }
    backend.close()
    emit(result)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_model_options(parser, default_model="smollm2-135m")
    parser.add_argument("--length", type=int, default=512, help="L: the longest row")
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--dtype", default="float32", help="auto | float32 | bfloat16")
    parser.add_argument("--bases", default=",".join(BASES))
    args = side_or_parent(parser, BASES, side)
    if args is None:
        return
    resolve_model_options(args)
    print(f"model {args.model} on {args.device}, dtype {args.dtype}; {machine()}")
    print(
        f"rows {args.length}, {args.length // 2}, {args.length // 4}, {args.length // 4}; LoRA 32"
    )
    print(
        f"{'base':5s} {'weights GB':>10s} {'peak RSS GB':>11s} {'peak anon GB':>12s} "
        f"{'tok/s':>6s} {'loss':>10s} {'load avg':>8s}"
    )
    argv = ["--model", args.model, "--device", args.device, "--dtype", args.dtype]
    argv += ["--length", str(args.length), "--steps", str(args.steps)]
    for base in args.bases.split(","):
        r = run_side(__file__, base, argv)
        cuda = r["cuda_step_peak_gb"]
        print(
            f"{base:5s} {r['weights_gb']:10.3f} {r['peak_rss_gb']:11.2f} {r['anon_peak_gb']:12.2f} "
            f"{r['tokens_per_s']:6.0f} {r['loss']:10.2f} {r['load']:8.1f}"
            + ("" if cuda is None else f"  CUDA step peak {cuda:.2f} GB"),
            flush=True,
        )


if __name__ == "__main__":
    main()
