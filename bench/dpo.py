"""Seconds per DPO step: Kitchen's `dpo` workflow on the local engine against TRL's DPOTrainer, on
the same model, the same (chosen, rejected) token sequences and the same LoRA, in one bench run.

    .venv/bin/pip install trl                      # bench only; never a Kitchen dependency
    .venv/bin/python bench/dpo.py                  # SmolLM2-135M, 8 pairs a step
    .venv/bin/python bench/dpo.py --model kitchen/tiny-llama --pairs 4 --steps 4

Both sides put LoRA on the attention and MLP projections (TRL cannot train one on lm_head), score
the reference with the adapter disabled (no second model) and take one AdamW step per batch. TRL
is handed Kitchen's rendered token ids (prompt / chosen / rejected split where the loss weights
start), so neither side tokenizes differently. A step's time excludes model loading; the first
step of each run is warm-up and left out, and a run counts its median step. Each run is a fresh
process (no shared memory, threads or caches); runs alternate Kitchen, TRL, Kitchen, ... and each
side's best run counts: outside load only ever slows a run down.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kitchen.engine.runner import BaseHook  # noqa: E402

PREFS = ROOT / "cookbook" / "data" / "prefs.jsonl"


class StepTimes(BaseHook):
    """Wall time of every training step of a Kitchen run."""

    def __init__(self) -> None:
        self.seconds: list[float] = []

    def on_step_end(self, step: int, metrics: dict[str, Any]) -> None:
        self.seconds.append(float(metrics["time/total"]))


def comparisons(n: int) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in PREFS.open()]
    if n > len(rows):
        raise SystemExit(f"bench: {n} pairs asked for, {PREFS.name} has {len(rows)}")
    return rows[:n]


def kitchen_run(args: argparse.Namespace, data_path: Path, log_dir: Path) -> list[float]:
    from kitchen.app.launch import Launch, build_config, get_recipe, run_launch
    from kitchen.workflows.common.setup import InitTrainingClient

    recipe = get_recipe("dpo")
    cfg = build_config(
        recipe,
        {
            "model_name": args.model,
            "dataset": str(data_path),
            "test_dataset": None,
            "batch_size": args.pairs,
            "max_length": args.max_length,
            "lora_rank": args.lora_rank,
            "learning_rate": args.learning_rate,
            "dpo_beta": 0.1,
            "save_every": 0,
            "num_epochs": 1,
            "no_register": True,
        },
    )
    workflow = recipe.workflow(cfg)
    # TRL cannot put LoRA on lm_head (it computes logprobs from lm_head.weight), so neither side does.
    workflow.steps = [
        replace(s, train_unembed=False) if isinstance(s, InitTrainingClient) else s
        for s in workflow.steps
    ]
    times = StepTimes()
    run_launch(
        workflow, Launch(backend="local", log_dir=log_dir, if_exists="delete", hooks=[times])
    )
    return times.seconds


def trl_rows(
    args: argparse.Namespace, rows: list[dict[str, Any]], tokenizer: Any
) -> list[dict[str, Any]]:
    """Kitchen's datum pairs as TRL's tokenized columns: prompt_ids + chosen_ids / rejected_ids."""
    from kitchen.workflows.preference.stages import labeled_comparison
    from train_core.preference import build_dpo_data
    from train_core.renderers import get_recommended_renderer_name, get_renderer
    from train_core.supervised import datum_weights, full_sequence_from_datum

    renderer = get_renderer(get_recommended_renderer_name(args.model), tokenizer)
    data, stats = build_dpo_data([labeled_comparison(r) for r in rows], renderer, args.max_length)
    assert stats.num_pairs == len(rows), stats

    def split(datum: Any) -> tuple[list[int], list[int]]:
        tokens = full_sequence_from_datum(datum).to_ints()
        weighted = np.flatnonzero(datum_weights(datum) > 0)
        start, stop = int(weighted[0]) + 1, int(weighted[-1]) + 2  # target i is token i + 1
        return tokens[:start], tokens[start:stop]

    out = []
    for chosen, rejected in zip(data[0::2], data[1::2], strict=True):
        prompt_ids, chosen_ids = split(chosen)
        prompt_ids_r, rejected_ids = split(rejected)
        assert prompt_ids == prompt_ids_r, "chosen and rejected share their prompt"
        out.append(
            {"prompt_ids": prompt_ids, "chosen_ids": chosen_ids, "rejected_ids": rejected_ids}
        )
    return out


def trl_run(args: argparse.Namespace, rows: list[dict[str, Any]], out_dir: Path) -> list[float]:
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import DPOConfig, DPOTrainer

    from kitchen.adapters.local import resolve_model
    from kitchen.adapters.local.lora import LoraSpec, peft_config

    path = resolve_model(args.model)
    tokenizer = AutoTokenizer.from_pretrained(path)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    lora = peft_config(model, LoraSpec(rank=args.lora_rank, train_unembed=False))
    dataset = Dataset.from_list(trl_rows(args, rows, tokenizer))

    class Timer(TrainerCallback):
        def __init__(self) -> None:
            self.seconds: list[float] = []
            self.start = 0.0

        def on_step_begin(self, *a: Any, **k: Any) -> None:
            self.start = time.perf_counter()

        def on_step_end(self, *a: Any, **k: Any) -> None:
            self.seconds.append(time.perf_counter() - self.start)

    timer = Timer()
    config = DPOConfig(
        output_dir=str(out_dir),
        per_device_train_batch_size=args.pairs,
        gradient_accumulation_steps=1,
        num_train_epochs=1,
        learning_rate=args.learning_rate,
        lr_scheduler_type="linear",
        adam_beta2=0.95,
        beta=0.1,
        max_length=None,  # the sequences are already Kitchen's, truncated to max_length
        use_cpu=not torch.cuda.is_available(),
        bf16=False,
        report_to="none",
        save_strategy="no",
        logging_steps=10_000,
        dataloader_num_workers=0,
        # TRL defaults to checkpointing (recompute activations to save memory); the engine does
        # not, so TRL runs without it unless asked: its fastest setting on a machine with memory.
        gradient_checkpointing=args.trl_gradient_checkpointing,
        disable_tqdm=True,
        seed=0,
    )
    # The rows are already tokenized; TRL's own preparation would re-tokenize prompt/chosen/rejected.
    DPOTrainer._prepare_dataset = lambda self, dataset, *a, **k: dataset  # type: ignore[method-assign]
    trainer = DPOTrainer(
        model=model,
        args=config,
        train_dataset=dataset,
        processing_class=tokenizer,
        peft_config=lora,
        callbacks=[timer],
    )
    trainer.train()
    return timer.seconds


def steady(seconds: list[float]) -> float:
    """Median seconds per step after the warm-up step (robust to a burst of outside load)."""
    return statistics.median(seconds[1:] if len(seconds) > 1 else seconds)


def one_side(args: argparse.Namespace) -> None:
    """Child process: one run of one side; prints {"seconds": [...], "peak_rss_gb", "threads"}."""
    import resource

    import torch

    rows = comparisons(args.pairs * args.steps)
    with tempfile.TemporaryDirectory(prefix="bench-dpo-") as tmp:
        if args.side == "kitchen":
            data_path = Path(tmp) / "pairs.jsonl"
            data_path.write_text("".join(json.dumps(r) + "\n" for r in rows))
            seconds = kitchen_run(args, data_path, Path(tmp) / "run")
        else:
            seconds = trl_run(args, rows, Path(tmp) / "run")
    peak_gb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB on Linux
    result = {"seconds": seconds, "peak_rss_gb": peak_gb, "threads": torch.get_num_threads()}
    print("RESULT " + json.dumps(result))


def run_side(side: str, argv: list[str]) -> dict[str, Any]:
    """A fresh process per run: neither side inherits the other's memory, threads or caches."""
    cmd = [sys.executable, __file__, *argv, "--side", side]
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    lines = [line for line in out.stdout.splitlines() if line.startswith("RESULT ")]
    if out.returncode != 0 or not lines:
        raise SystemExit(
            f"bench: the {side} run failed (exit {out.returncode}):\n{out.stderr[-3000:]}"
        )
    return dict(json.loads(lines[-1][len("RESULT ") :]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="HuggingFaceTB/SmolLM2-135M-Instruct")
    parser.add_argument("--pairs", type=int, default=8, help="comparison pairs per step")
    parser.add_argument("--steps", type=int, default=6, help="steps per run (first is warm-up)")
    parser.add_argument("--repeats", type=int, default=2, help="runs per side, alternating")
    parser.add_argument("--max-length", type=int, default=1024)
    parser.add_argument("--lora-rank", type=int, default=32)
    parser.add_argument("--learning-rate", type=float, default=1e-5)
    parser.add_argument(
        "--trl-gradient-checkpointing", action="store_true", help="TRL's default; slower"
    )
    parser.add_argument("--side", choices=["kitchen", "trl"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    try:
        import trl
    except ImportError:
        print(
            "bench/dpo.py: skipped, TRL is not installed (`.venv/bin/pip install trl`, bench only)"
        )
        return
    if args.side:
        one_side(args)
        return
    argv = [a for a in sys.argv[1:] if a not in ("--repeats", str(args.repeats))]
    runs: dict[str, list[dict[str, Any]]] = {"kitchen": [], "trl": []}
    for _ in range(args.repeats):
        for side in runs:
            runs[side].append(run_side(side, argv))
            print(
                f"  {side:8s} " + ", ".join(f"{x:.2f}" for x in runs[side][-1]["seconds"]),
                flush=True,
            )
    rows = comparisons(args.pairs * args.steps)
    print(
        f"model {args.model}  pairs/step {args.pairs}  steps {args.steps}  LoRA rank "
        f"{args.lora_rank}  trl {trl.__version__} (gradient checkpointing "
        f"{'on' if args.trl_gradient_checkpointing else 'off'})  {len(rows)} comparisons"
    )
    best = {side: min(steady(r["seconds"]) for r in results) for side, results in runs.items()}
    for side, results in runs.items():
        rss = max(r["peak_rss_gb"] for r in results)
        print(
            f"{side:8s} {best[side]:.3f} s/step  (torch threads {results[0]['threads']}, "
            f"peak RSS {rss:.2f} GB)"
        )
    print(f"ratio kitchen / TRL: {best['kitchen'] / best['trl']:.2f}x (target <= 1.0x)")


if __name__ == "__main__":
    main()
