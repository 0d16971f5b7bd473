"""Seconds per DPO step: Kitchen's `dpo` workflow on the local engine, TRL's DPOTrainer and a
hand-written loop, on the same model, the same (chosen, rejected) token sequences and the same LoRA.

    .venv/bin/pip install trl --no-deps            # bench only; never a Kitchen dependency
    .venv/bin/python bench/dpo.py                  # SmolLM2-135M, 8 pairs a step
    .venv/bin/python bench/dpo.py --model kitchen/tiny-llama --pairs 4 --steps 4
    .venv/bin/python bench/dpo.py --size 1b --device cuda --pairs 16   # the issue-28 GPU row

Every side puts LoRA rank 32 on the attention and MLP projections (TRL cannot train one on lm_head),
scores the reference with the adapter disabled (no second model), takes one AdamW step per batch and
computes in the same dtype (--dtype; auto = bf16 autocast over fp32 weights where the CPU has bf16
units, as the engine chooses). TRL and the loop are handed Kitchen's rendered token ids (prompt /
chosen / rejected split where the loss weights start), so no side tokenizes differently.
    kitchen  the dpo recipe on the local engine (reference logprobs, forward_backward_custom, optim)
    trl      DPOTrainer: chosen + rejected in one padded batch, reference forward, no checkpointing
    loop     the limit: one padded batch of chosen + rejected, reference forward (adapter off, no
             grad), policy forward + backward, AdamW
Each side runs in a fresh process (bench/sides.py) on --device (bench/model_options.py, with
--model / --size); a step's time excludes model loading, the first step is warm-up, and on a GPU
every clock read waits for the queued kernels first. Printed per side: s/step (wall and CPU), reference / update seconds, the real
and padded tokens pushed through the model per step (update = passes with grad), torch threads, the
load average and peak RSS; and the mean prompt and response tokens of the data. Kitchen's phases
are the engine's own work on its one compute thread: the reference scoring and the update.

The earlier version reported TRL at 87 s a step and 7.7 GB: TRL ran in fp32 against Kitchen's bf16
autocast, at a load near 8 on 2 cores, padding 16 sequences to the longest in one pass (activations
for the whole padded batch, no micro-batching); the padded/real token columns show that padding.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from model_options import add_model_options, resolve_model_options  # noqa: E402
from sides import (  # noqa: E402
    StagePhases,
    TokenCount,
    add_time,
    count_update_plans,
    emit,
    lora_model,
    median_phases,
    run_sides,
    steady,
    synchronize,
    table,
)

SIDES = ("kitchen", "trl", "loop")
PHASES = ["reference", "update", "other"]

PREFS = ROOT / "cookbook" / "data" / "prefs.jsonl"


def comparisons(n: int) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in PREFS.open()]
    if n > len(rows):
        raise SystemExit(f"bench: {n} pairs asked for, {PREFS.name} has {len(rows)}")
    return rows[:n]


def trl_rows(
    args: argparse.Namespace, rows: list[dict[str, Any]], tokenizer: Any
) -> list[dict[str, Any]]:
    """Kitchen's datum pairs as TRL's tokenized columns: prompt_ids + chosen_ids / rejected_ids."""
    from kitchen.workflows.preference.stages import labeled_comparison
    from train_core.preference import build_dpo_data, chosen_rejected
    from train_core.renderers import get_recommended_renderer_name, get_renderer
    from train_core.scoring import full_sequence
    from train_core.supervised import datum_weights

    renderer = get_renderer(get_recommended_renderer_name(args.model), tokenizer)
    data, stats = build_dpo_data([labeled_comparison(r) for r in rows], renderer, args.max_length)
    assert stats.num_pairs == len(rows), stats

    def split(datum: Any) -> tuple[list[int], list[int]]:
        tokens = full_sequence(datum).to_ints()
        weighted = np.flatnonzero(datum_weights(datum) > 0)
        start, stop = int(weighted[0]) + 1, int(weighted[-1]) + 2  # target i is token i + 1
        return tokens[:start], tokens[start:stop]

    out = []
    for chosen, rejected in zip(*chosen_rejected(data), strict=True):
        prompt_ids, chosen_ids = split(chosen)
        prompt_ids_r, rejected_ids = split(rejected)
        assert prompt_ids == prompt_ids_r, "chosen and rejected share their prompt"
        out.append(
            {"prompt_ids": prompt_ids, "chosen_ids": chosen_ids, "rejected_ids": rejected_ids}
        )
    return out


def kitchen_run(args: argparse.Namespace, data_path: Path, log_dir: Path) -> dict[str, Any]:
    from kitchen.adapters.local.backend import LocalBackend
    from kitchen.adapters.local.clients.sampling_client import LocalSamplingClient
    from kitchen.adapters.local.clients.training_client import LocalTrainingClient
    from kitchen.app.launch import Launch, run_launch
    from kitchen.app.resolve import resolve_config
    from kitchen.ports import BackendSettings
    from kitchen.workflows.common.setup import InitTrainingClient

    tokens = TokenCount().install()
    planned = count_update_plans()
    # The dpo workflow pipelines (a step's forward_backward resolves while the next step's stages
    # run), so stage wall times are no breakdown: time the engine's own work instead.
    times = StagePhases(lambda stage: "stages")
    add_time(LocalSamplingClient, "_score", lambda: times.current, "reference")
    add_time(LocalTrainingClient, "_run_custom", lambda: times.current, "update")
    add_time(LocalTrainingClient, "_optim_step", lambda: times.current, "update")
    resolved = resolve_config(
        "dpo",
        values={
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
            "register_model": False,
        },
    )
    workflow = resolved.workflow
    # TRL cannot put LoRA on lm_head (it computes logprobs from lm_head.weight), so neither side does.
    workflow.nodes = [
        replace(s, train_unembed=False) if isinstance(s, InitTrainingClient) else s
        for s in workflow.nodes
    ]
    backend = LocalBackend(
        BackendSettings(log_dir=log_dir, seed=0, dtype=args.dtype, device=args.device)
    )
    run_launch(
        workflow,
        Launch(backend=backend, log_dir=log_dir, if_exists="delete", hooks=[cast(Any, times)]),
    )
    counts = tokens.per_step(args.steps)
    counts["update_real"] = planned[0] / args.steps
    for seconds, step in zip(times.seconds, times.steps, strict=True):
        step["other"] = seconds - step.get("reference", 0.0) - step.get("update", 0.0)
    return {
        "seconds": times.seconds,
        "cpu": times.cpu,
        "phases": median_phases(times.steps, PHASES),
        "tokens": counts,
        "dtype": backend.dtype_name,
    }


def trl_run(args: argparse.Namespace, rows: list[dict[str, Any]], out_dir: Path) -> dict[str, Any]:
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import DPOConfig, DPOTrainer

    tokens = TokenCount().install()
    model, tokenizer, lora = lora_model(args.model, args.lora_rank)
    dataset = Dataset.from_list(trl_rows(args, rows, tokenizer))
    steps: list[dict[str, float]] = []

    class Timer(TrainerCallback):
        def __init__(self) -> None:
            self.seconds: list[float] = []
            self.cpu: list[float] = []

        def on_step_begin(self, *a: Any, **k: Any) -> None:
            synchronize()
            self.start, self.cpu0 = time.perf_counter(), time.process_time()
            self.nograd0 = tokens.nograd_seconds

        def on_step_end(self, *a: Any, **k: Any) -> None:
            synchronize()
            self.seconds.append(time.perf_counter() - self.start)
            self.cpu.append(time.process_time() - self.cpu0)
            # TRL scores the reference inline in _compute_loss: its no-grad decoder forwards
            reference = tokens.nograd_seconds - self.nograd0
            steps.append({"reference": reference, "update": self.seconds[-1] - reference})

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
        use_cpu=args.device == "cpu",
        bf16=args.dtype == "bfloat16",  # autocast over fp32 weights, as Kitchen's engine
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
    return {
        "seconds": timer.seconds,
        "cpu": timer.cpu,
        "phases": median_phases(steps, PHASES),
        "tokens": tokens.per_step(args.steps),
        "dtype": args.dtype,
    }


def loop_run(args: argparse.Namespace, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The limit: per step one right-padded batch of the chosen and rejected sequences, a
    reference forward with the adapter off (no grad), a policy forward + backward, AdamW."""
    import torch
    import torch.nn.functional as F
    from peft import get_peft_model

    tokens = TokenCount().install()
    base, tokenizer, lora = lora_model(args.model, args.lora_rank)
    model = get_peft_model(base.to(args.device), lora)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=args.learning_rate, betas=(0.9, 0.95), weight_decay=0)
    pairs = trl_rows(args, rows, tokenizer)
    device = torch.device(args.device)
    autocast = torch.autocast(device.type, dtype=torch.bfloat16, enabled=args.dtype == "bfloat16")
    seconds: list[float] = []
    cpu: list[float] = []
    steps: list[dict[str, float]] = []

    def sequence_logprobs(ids: Any, attention: Any, weights: Any) -> Any:
        with autocast:
            hidden = model(input_ids=ids, attention_mask=attention).logits[:, :-1]
        logprobs = torch.log_softmax(hidden.float(), -1).gather(-1, ids[:, 1:, None])[..., 0]
        return (logprobs * weights).sum(1)

    for step in range(args.steps):
        batch = pairs[step * args.pairs : (step + 1) * args.pairs]
        seqs = [r["prompt_ids"] + r[k] for k in ("chosen_ids", "rejected_ids") for r in batch]
        starts = [len(r["prompt_ids"]) for _ in range(2) for r in batch]
        width = max(len(x) for x in seqs)
        ids = torch.tensor(
            [x + [tokenizer.pad_token_id] * (width - len(x)) for x in seqs], device=device
        )
        attention = torch.tensor(
            [[1] * len(x) + [0] * (width - len(x)) for x in seqs], device=device
        )
        position = torch.arange(1, width, device=device)[None]
        starts_B = torch.tensor(starts, device=device)
        weights = ((position >= starts_B[:, None]) & (attention[:, 1:] == 1)).float()
        synchronize()
        t0, cpu0 = time.perf_counter(), time.process_time()
        with torch.no_grad(), model.disable_adapter():
            reference = sequence_logprobs(ids, attention, weights)
        synchronize()
        t1 = time.perf_counter()
        policy = sequence_logprobs(ids, attention, weights)
        margin = (policy - reference).view(2, -1)
        loss = -F.logsigmoid(0.1 * (margin[0] - margin[1])).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        synchronize()
        t2 = time.perf_counter()
        seconds.append(t2 - t0)
        cpu.append(time.process_time() - cpu0)
        steps.append({"reference": t1 - t0, "update": t2 - t1})
    return {
        "seconds": seconds,
        "cpu": cpu,
        "phases": median_phases(steps, PHASES),
        "tokens": tokens.per_step(args.steps),
        "dtype": args.dtype,
    }


def data_lengths(args: argparse.Namespace, rows: list[dict[str, Any]]) -> dict[str, float]:
    """Mean prompt and response (chosen and rejected) tokens of the pairs every side trains on."""
    from transformers import AutoTokenizer

    from kitchen.adapters.local import resolve_model

    tokenizer = AutoTokenizer.from_pretrained(resolve_model(args.model))
    pairs = trl_rows(args, rows, tokenizer)
    responses = [len(r[k]) for r in pairs for k in ("chosen_ids", "rejected_ids")]
    return {
        "prompt_tokens": statistics.mean(len(r["prompt_ids"]) for r in pairs),
        "completion_tokens": statistics.mean(responses),
    }


def one_side(args: argparse.Namespace) -> None:
    """Child process: one run of one side; prints its RESULT line."""
    rows = comparisons(args.pairs * args.steps)
    with tempfile.TemporaryDirectory(prefix="bench-dpo-") as tmp:
        if args.side == "kitchen":
            data_path = Path(tmp) / "pairs.jsonl"
            data_path.write_text("".join(json.dumps(r) + "\n" for r in rows))
            result = kitchen_run(args, data_path, Path(tmp) / "run")
        elif args.side == "trl":
            result = trl_run(args, rows, Path(tmp) / "run")
        else:
            result = loop_run(args, rows)
    emit({**result, **data_lengths(args, rows)})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_model_options(parser, default_model="HuggingFaceTB/SmolLM2-135M-Instruct")
    parser.add_argument("--pairs", type=int, default=8, help="comparison pairs per step")
    parser.add_argument("--steps", type=int, default=3, help="steps per run (first is warm-up)")
    parser.add_argument("--max-length", type=int, default=1024)
    parser.add_argument("--lora-rank", type=int, default=32)
    parser.add_argument("--learning-rate", type=float, default=1e-5)
    parser.add_argument("--dtype", choices=["auto", "bfloat16", "float32"], default="auto")
    parser.add_argument(
        "--trl-gradient-checkpointing", action="store_true", help="TRL's default; slower"
    )
    parser.add_argument("--sides", default=",".join(SIDES), help=f"comma-separated, of {SIDES}")
    parser.add_argument("--side", choices=SIDES, help=argparse.SUPPRESS)
    args = parser.parse_args()
    resolve_model_options(args)
    if args.dtype == "auto":  # as the engine chooses: bf16 on accelerators and CPUs with bf16 units
        from kitchen.adapters.local.model.settings import cpu_has_native_bf16

        native = args.device != "cpu" or cpu_has_native_bf16()
        args.dtype = "bfloat16" if native else "float32"
    if args.side:
        one_side(args)
        return
    sides = [x for x in args.sides.split(",") if x]
    if set(sides) - set(SIDES):
        raise SystemExit(f"bench/dpo.py: unknown sides {sorted(set(sides) - set(SIDES))}")
    if "trl" in sides and importlib.util.find_spec("trl") is None:
        print("bench/dpo.py: TRL is not installed (`.venv/bin/pip install trl --no-deps`): skipped")
        sides.remove("trl")
    argv = [
        *("--model", args.model, "--pairs", str(args.pairs), "--steps", str(args.steps)),
        *("--max-length", str(args.max_length), "--lora-rank", str(args.lora_rank)),
        *("--learning-rate", str(args.learning_rate), "--dtype", args.dtype),
        *("--device", args.device),
        *(["--trl-gradient-checkpointing"] if args.trl_gradient_checkpointing else []),
    ]
    print(
        f"DPO step on {args.model}: {args.pairs} pairs/step, {args.steps} steps per side (first "
        f"excluded), LoRA rank {args.lora_rank}, dtype {args.dtype}, device {args.device}, TRL "
        f"gradient checkpointing "
        f"{'on' if args.trl_gradient_checkpointing else 'off'}, load {os.getloadavg()[0]:.1f} on "
        f"{os.cpu_count()} CPUs"
    )
    results = run_sides(__file__, sides, argv)
    print("s/step: median after the first step; phases in s; tokens through the model per step")
    table(results, PHASES)
    if "kitchen" in results:
        for other in results:
            if other != "kitchen":
                ratio = steady(results["kitchen"]["seconds"]) / steady(results[other]["seconds"])
                print(f"kitchen / {other} = {ratio:.2f}x")


if __name__ == "__main__":
    main()
