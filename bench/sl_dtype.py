"""Numerics of bf16 autocast against fp32: sl_basic's final train NLL after N steps, once per dtype.

    .venv/bin/python bench/sl_dtype.py                       # 50 steps, bundled chat data, SmolLM2
    .venv/bin/python bench/sl_dtype.py --steps 10 --batch-size 4

Each dtype runs in a fresh process (bench/sides.py) with the same seed, data and order; the figure
is the mean train NLL of the last 5 steps (one step's NLL depends on its batch). Target: bf16
within 3% of fp32. Load does not matter here: this is numerics, not speed.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sides import emit, run_side, side_or_parent

LAST = 5  # steps averaged at the end


def run_one(dtype: str, args: argparse.Namespace) -> None:
    """Child process: sl_basic under `dtype`; its train NLL per step."""
    from kitchen.adapters.local.backend import LocalBackend
    from kitchen.app.launch import run
    from kitchen.ports import BackendSettings

    with tempfile.TemporaryDirectory() as log_dir:
        backend = LocalBackend(BackendSettings(log_dir=Path(log_dir), seed=0, dtype=dtype))
        run(
            "sl_basic",
            {
                "dataset": args.dataset,
                "test_dataset": None,
                "batch_size": args.batch_size,
                "max_length": args.max_length,
                "eval_every": 0,
                "save_every": 0,
            },
            backend=backend,
            log_dir=log_dir,
            max_steps=args.steps,
        )
        rows = [json.loads(line) for line in (Path(log_dir) / "metrics.jsonl").open()]
    nll = [float(r["train_mean_nll"]) for r in rows if "train_mean_nll" in r]
    emit({"nll": nll, "dtype": backend.dtype_name})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--max-length", type=int, default=512)
    parser.add_argument("--dataset", default="bundled:chat")
    args = side_or_parent(parser, ["float32", "bfloat16"], lambda a: run_one(a.side, a))
    if args is None:
        return
    argv = [
        *("--steps", str(args.steps), "--batch-size", str(args.batch_size)),
        *("--max-length", str(args.max_length), "--dataset", args.dataset),
    ]
    results: dict[str, Any] = {d: run_side(__file__, d, argv) for d in ("float32", "bfloat16")}
    final = {d: statistics.mean(r["nll"][-LAST:]) for d, r in results.items()}
    for d, r in results.items():
        print(
            f"{d:9s} steps {len(r['nll'])}, train NLL first {r['nll'][0]:.4f}, mean of last "
            f"{LAST} {final[d]:.4f}, threads {r['threads']}, load {r['load']:.1f}"
        )
    diff = abs(final["bfloat16"] - final["float32"]) / final["float32"]
    print(
        f"bf16 vs fp32 final train NLL: {100 * diff:.2f}% apart (target <= 3%: "
        f"{'met' if diff <= 0.03 else 'missed'})"
    )


if __name__ == "__main__":
    main()
