"""RL rollout concurrency, and seconds per RL step: Kitchen against TRL's GRPOTrainer and a loop.

    .venv/bin/python bench/rl.py                      # (a) seconds; (b) a few minutes on 2 cores
    .venv/bin/python bench/rl.py --sides kitchen,loop # (b) without TRL or the fp32 serial engine
    .venv/bin/python bench/rl.py --steps 4 --groups 4 --group-size 8 --max-tokens 8

(a) A sampler that takes a fixed latency per call: a batch of G groups of N envs should finish in
    about one latency (every group is its own task, a group's N prompts one call), not G*N.
(b) Seconds per RL step (sample G*N completions, score them, one update), each side in a fresh
    process (bench/sides.py), same model (SmolLM2-135M-Instruct), same prompt ids (the arithmetic
    env's rendered few-shot prompts), group size, prompts per step, completion cap, learning rate,
    temperature 1, no KL, LoRA rank 32 on attention + MLP, compute dtype (--dtype; auto = bf16
    autocast where the CPU has bf16 units, as the engine chooses):
      kitchen              rl_basic on the local engine (it also adapts lm_head: ~1% more FLOPs)
      kitchen-fp32-serial  the same, emulating the old engine: fp32, one prompt per sample call,
                           each call awaited before the next (no shared decode batch, no
                           batched prefill; fp32 keeps the adapters unmerged); it keeps today's
                           compute thread, shared-prefix training and token draw, so it is
                           faster than the old engine was
      trl                  TRL's GRPOTrainer, one generation batch of G*N per optimizer step,
                           no gradient checkpointing, no reference model
      loop                 the limit: HF generate + reward + one policy-gradient forward/backward
    Printed per side: s/step, sample / score / update seconds, the mean prompt and completion tokens,
    the real and padded tokens pushed through the model per step (update = passes with grad),
    torch threads and the load average. TRL is not a Kitchen dependency: install it into the venv
    for this bench only (`.venv/bin/pip install trl --no-deps`).
Targets: kitchen <= 0.5x kitchen-fp32-serial and <= 0.6x trl, same run.

The earlier version of this bench reported TRL at 137 s a step (Kitchen 16 s): it ran TRL in fp32
(bf16=False) against Kitchen's bf16 autocast, both in one process one after the other, at a load
near 8 on 2 cores. py-spy on that configuration: 56% in HF generate (fp32; all 32 rows prefilled,
where Kitchen prefills each distinct prompt once), 23% in the fp32 loss forward/backward, and the
process got about a third of a core. Its GRPOConfig itself was right (one generation of G*N per
step, 8-token cap, no accumulation, checkpointing or reference model).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sides import (
    StagePhases,
    TokenCount,
    add_time,
    count_update_plans,
    emit,
    lora_model,
    median_phases,
    run_sides,
    steady,
    table,
)

MODEL = "HuggingFaceTB/SmolLM2-135M-Instruct"


# ---------------------------------------------------------------------------------------------
# (a) rollout concurrency against a fixed-latency sampler


def bench_concurrency(groups: int, group_size: int, latency: float) -> None:
    from cookbook.envs.arithmetic import ArithmeticEnvs
    from kitchen.adapters.fake.tokenizer import FakeTokenizer
    from kitchen.workflows.reinforcement.rollout import RolloutSampling
    from tests.rl_core.rl_core_fakes import LatencySampler  # the same scenario's test sampler
    from train_core.renderers import get_renderer
    from train_core.rl import do_batch_rollouts
    from train_core.rl.types import RLEnvContext

    renderer = get_renderer("chatml", FakeTokenizer())
    train, _ = ArithmeticEnvs(groups, group_size, test_problems=0)(
        RLEnvContext(renderer, renderer.tokenizer)
    )
    print(f"(a) {groups} groups x {group_size} envs, sampler latency {latency:.2f} s per call")
    for coalesce in (True, False):
        sampler = LatencySampler(latency)
        policy = RolloutSampling(max_tokens=8, coalesce=coalesce).policy(sampler, 0)

        async def batch(policy: Any = policy) -> float:
            t0 = time.perf_counter()
            await do_batch_rollouts(list(train.get_batch(0)), policy)
            return time.perf_counter() - t0

        elapsed = asyncio.run(batch())
        label = "grouped (one call per group)" if coalesce else "one call per env"
        envs = groups * group_size
        print(
            f"    {label:30s}: {elapsed:.3f} s = {elapsed / latency:.2f} latencies, not {envs} "
            f"(G*N); {len(sampler.calls)} sample calls; speedup over one env at a time "
            f"{envs * latency / elapsed:.0f}x"
        )


# ---------------------------------------------------------------------------------------------
# (b) seconds per RL step, four sides, each in a fresh process (bench/sides.py)

SIDES = ("kitchen", "kitchen-fp32-serial", "trl", "loop")
PHASES = ["sample", "score", "update", "other"]


@dataclass
class StepSettings:
    groups: int
    group_size: int
    max_tokens: int
    steps: int
    learning_rate: float
    max_operand: int
    dtype: str  # "bfloat16" | "float32": the compute dtype of the Kitchen, TRL and loop sides


@dataclass
class Lengths:
    """Prompt and completion tokens of every sampled sequence (a prompt counts once per sample)."""

    prompt: list[int] = field(default_factory=list)
    completion: list[int] = field(default_factory=list)

    def means(self) -> dict[str, float]:
        return {
            "prompt_tokens": statistics.mean(self.prompt) if self.prompt else 0.0,
            "completion_tokens": statistics.mean(self.completion) if self.completion else 0.0,
        }


def side_result(
    seconds: list[float],
    cpu: list[float],
    steps: list[dict[str, float]],
    tokens: dict[str, float],
    dtype: str,
    lengths: Lengths,
) -> dict[str, Any]:
    """What every side reports: seconds and CPU seconds per step, the median phases, the tokens
    per step, the compute dtype and the mean prompt and completion lengths."""
    return {
        "seconds": seconds,
        "cpu": cpu,
        "phases": median_phases(steps, PHASES),
        "tokens": tokens,
        "dtype": dtype,
        **lengths.means(),
    }


def rl_phase(stage: str) -> str:
    if "rollout" in stage:
        return "sample"
    return "update" if any(k in stage for k in ("train", "forward", "optim")) else "other"


def kitchen_side(s: StepSettings, serial: bool) -> dict[str, Any]:
    """rl_basic on the local engine. `serial` emulates the old engine: fp32 and one prompt per
    sample call, each call awaited before the next is issued (no shared decode batch)."""
    from kitchen.adapters.local.backend import LocalBackend
    from kitchen.adapters.local.clients.sampling_client import LocalSamplingClient
    from kitchen.app.launch import run
    from kitchen.ports import BackendSettings

    tokens = TokenCount().install()
    lengths = Lengths()
    planned = count_update_plans()
    sample, respond = LocalSamplingClient.sample, LocalSamplingClient._response

    def counted_sample(self: Any, prompt: Any, num_samples: int, *a: Any, **k: Any) -> Any:
        lengths.prompt.extend([prompt.length] * num_samples)
        future = sample(self, prompt, num_samples, *a, **k)
        if serial:
            future.result()
        return future

    def counted_response(self: Any, done: Any, *a: Any) -> Any:
        out = respond(self, done, *a)
        lengths.completion.extend(len(seq.tokens) for seq in out.sequences)
        return out

    LocalSamplingClient.sample = counted_sample  # type: ignore[method-assign]
    LocalSamplingClient._response = counted_response  # type: ignore[method-assign,assignment]
    dtype = "float32" if serial else s.dtype
    phases = StagePhases(rl_phase)
    with tempfile.TemporaryDirectory() as log_dir:
        backend = LocalBackend(BackendSettings(log_dir=Path(log_dir), seed=0, dtype=dtype))
        run(
            "rl_basic",
            {
                "model_name": MODEL,
                "groups_per_batch": s.groups,
                "group_size": s.group_size,
                "max_tokens": s.max_tokens,
                "num_batches": s.steps,
                "learning_rate": s.learning_rate,
                "arithmetic_max_operand": s.max_operand,
                "remove_constant_reward_groups": False,  # TRL trains on every group too
                "eval_every": 0,
                "save_every": 0,
            },
            backend=backend,
            log_dir=log_dir,
            hooks=[cast(Any, phases)],
        )
    counts = tokens.per_step(s.steps)
    counts["update_real"] = planned[0] / s.steps
    return side_result(
        phases.seconds, phases.cpu, phases.steps, counts, backend.dtype_name, lengths
    )


def arithmetic_prompts(s: StepSettings, tokenizer: Any) -> list[dict[str, Any]]:
    """The rl_basic prompts (few-shot + question) as token ids, one row per group, in step order."""
    from cookbook.envs.arithmetic import ArithmeticEnvs
    from train_core.renderers import get_renderer
    from train_core.rl.types import RLEnvContext

    renderer = get_renderer("chatml", tokenizer)
    train, _ = ArithmeticEnvs(s.groups, s.group_size, s.steps, s.max_operand, test_problems=0)(
        RLEnvContext(renderer, tokenizer)
    )
    rows = []
    for i in range(s.steps):
        for builder in train.get_batch(i):
            env = cast(Any, builder).env_thunk()
            prompt = renderer.build_generation_prompt(env._conversation())
            ids = prompt.to_ints()
            rows.append(
                {"prompt": tokenizer.decode(ids), "ids": ids, "answer": env.get_reference_answer()}
            )
    return rows


def arithmetic_reward(texts: list[str], answers: list[str], stopped: list[bool]) -> list[float]:
    """The arithmetic env's reward: correct, minus 0.1 without the stop token."""
    from cookbook.envs.arithmetic import extract_final_int

    return [
        float(extract_final_int(t) == int(a)) + 0.1 * (float(stop) - 1)
        for t, a, stop in zip(texts, answers, stopped, strict=True)
    ]


def trl_side(s: StepSettings) -> dict[str, Any]:
    """TRL's GRPOTrainer on the same prompts, group size, prompts per step, completion cap,
    learning rate, LoRA and compute dtype. sample = its generate; score = the rest of
    _generate_and_score_completions (rewards, advantages); update = the rest of the step."""
    import datasets
    import torch
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    tokens = TokenCount().install()
    model, tokenizer, lora = lora_model(MODEL, 32)
    rows = arithmetic_prompts(s, tokenizer)
    lengths = Lengths()

    def reward(completions: list[str], answer: list[str], **kw: Any) -> list[float | None]:
        ids = kw["completion_ids"]
        stopped = [len(c) < s.max_tokens or c[-1] == tokenizer.eos_token_id for c in ids]
        return list(arithmetic_reward(completions, answer, stopped))

    seconds: list[float] = []
    cpu: list[float] = []
    steps: list[dict[str, float]] = []

    class StepTimer(TrainerCallback):
        def on_step_begin(self, *a: Any, **k: Any) -> None:
            steps.append({})
            self.t0, self.cpu0 = time.perf_counter(), time.process_time()

        def on_step_end(self, *a: Any, **k: Any) -> None:
            seconds.append(time.perf_counter() - self.t0)
            cpu.append(time.process_time() - self.cpu0)
            phase = steps[-1]
            prepare = phase.pop("prepare", 0.0)
            phase["score"] = prepare - phase.get("sample", 0.0)
            phase["update"] = seconds[-1] - prepare

    with tempfile.TemporaryDirectory() as out:
        config = GRPOConfig(
            output_dir=out,
            # one generation batch per optimizer step: G prompts x N completions
            per_device_train_batch_size=s.groups * s.group_size,
            gradient_accumulation_steps=1,
            num_generations=s.group_size,
            max_completion_length=s.max_tokens,
            learning_rate=s.learning_rate,
            lr_scheduler_type="constant",
            warmup_steps=0,
            beta=0.0,  # no reference model, as rl_basic without a KL penalty
            temperature=1.0,
            max_steps=s.steps,
            logging_steps=10_000,
            save_strategy="no",
            report_to="none",
            use_cpu=not torch.cuda.is_available(),
            bf16=s.dtype == "bfloat16",  # autocast over fp32 weights, as Kitchen's engine
            gradient_checkpointing=False,  # TRL's default recomputes activations; Kitchen does not
            shuffle_dataset=False,
            dataloader_num_workers=0,
            disable_tqdm=True,
            seed=0,
        )
        trainer = GRPOTrainer(
            model=model,
            reward_funcs=reward,
            args=config,
            train_dataset=datasets.Dataset.from_list(
                [{"prompt": r["prompt"], "answer": r["answer"]} for r in rows]
            ),
            processing_class=tokenizer,
            peft_config=lora,
            callbacks=[StepTimer()],
        )
        add_time(trainer, "_generate_and_score_completions", lambda: steps[-1], "prepare")
        add_time(trainer, "_generate", lambda: steps[-1], "sample")
        generate = trainer._generate

        def generate_counted(prompts: list[Any]) -> Any:
            # TRL generates outside the Trainer's autocast (fp32 even with bf16=True); the bench
            # gives it the same bf16 autocast Kitchen samples in, which only favours TRL.
            with autocast(s):
                out = generate(prompts)
            lengths.prompt.extend(len(p) for p in out[0])
            lengths.completion.extend(len(c) for c in out[1])
            return out

        trainer._generate = generate_counted  # type: ignore[method-assign]
        trainer.train()
    return side_result(seconds, cpu, steps, tokens.per_step(s.steps), s.dtype, lengths)


def loop_side(s: StepSettings) -> dict[str, Any]:
    """The limit: HF generate (KV cache, one batch of G*N), the reward, one policy-gradient
    forward + backward over prompt + completion, one AdamW step. Nothing else."""
    import torch
    from peft import get_peft_model

    tokens = TokenCount().install()
    base, tokenizer, lora = lora_model(MODEL, 32)
    model = get_peft_model(base, lora)
    rows = arithmetic_prompts(s, tokenizer)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=s.learning_rate, betas=(0.9, 0.95), weight_decay=0.0)
    stop = tokenizer.convert_tokens_to_ids("<|im_end|>")  # the chatml renderer's stop token
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else stop
    lengths = Lengths()
    seconds: list[float] = []
    cpu: list[float] = []
    steps: list[dict[str, float]] = []
    for step in range(s.steps):
        batch = rows[step * s.groups : (step + 1) * s.groups]
        t0, cpu0 = time.perf_counter(), time.process_time()
        prompts = [r["ids"] for r in batch for _ in range(s.group_size)]
        width = max(len(p) for p in prompts)
        ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts])
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
        with torch.no_grad(), autocast(s):
            out = model.generate(
                input_ids=ids,
                attention_mask=mask,
                do_sample=True,
                temperature=1.0,
                top_k=0,
                top_p=1.0,
                max_new_tokens=s.max_tokens,
                eos_token_id=stop,
                pad_token_id=pad,
            )
        t1 = time.perf_counter()
        completion = out[:, width:]
        done = (completion == stop).int().cumsum(1)
        keep = (done == 0) | ((done == 1) & (completion == stop))  # up to and with the stop
        n_tokens = keep.sum(1).tolist()
        lengths.prompt.extend(len(p) for p in prompts)
        lengths.completion.extend(n_tokens)
        texts = tokenizer.batch_decode(completion * keep + pad * ~keep, skip_special_tokens=True)
        stopped = [bool((c == stop).any()) for c in completion]
        answers = [r["answer"] for r in batch for _ in range(s.group_size)]
        rewards = torch.tensor(arithmetic_reward(texts, answers, stopped))
        grouped = rewards.view(s.groups, s.group_size)
        advantages = (grouped - grouped.mean(1, keepdim=True)).flatten()
        t2 = time.perf_counter()
        with autocast(s):
            logits = model(
                input_ids=out,
                attention_mask=torch.cat([mask, keep.long()], 1),
                logits_to_keep=completion.shape[1] + 1,
            ).logits[:, :-1]
        logprobs = torch.log_softmax(logits.float(), -1).gather(-1, completion[..., None])[..., 0]
        loss = -(advantages[:, None] * logprobs * keep).sum() / keep.sum()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        t3 = time.perf_counter()
        seconds.append(t3 - t0)
        cpu.append(time.process_time() - cpu0)
        steps.append({"sample": t1 - t0, "score": t2 - t1, "update": t3 - t2})
    return side_result(seconds, cpu, steps, tokens.per_step(s.steps), s.dtype, lengths)


def autocast(s: StepSettings) -> Any:
    import torch

    return torch.autocast("cpu", dtype=torch.bfloat16, enabled=s.dtype == "bfloat16")


def run_one(side: str, s: StepSettings) -> None:
    """Child process: one side, one RESULT line."""
    if side == "trl":
        result = trl_side(s)
    elif side == "loop":
        result = loop_side(s)
    else:
        result = kitchen_side(s, serial=side == "kitchen-fp32-serial")
    emit(result)


def bench_steps(s: StepSettings, sides: list[str], argv: list[str]) -> None:
    print(
        f"(b) RL step on {MODEL}: {s.groups} prompts x {s.group_size} samples, <= {s.max_tokens} "
        f"new tokens, {s.steps} steps per side (first excluded), dtype {s.dtype}, "
        f"load {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
    )
    results = run_sides(__file__, sides, argv)
    print("s/step: median after the first step; phases in s; tokens through the model per step")
    table(results, PHASES)
    base = results.get("kitchen")
    if base is None:
        return
    for other, target in (("kitchen-fp32-serial", 0.5), ("trl", 0.6), ("loop", None)):
        if other in results:
            ratio = steady(base["seconds"]) / steady(results[other]["seconds"])
            verdict = (
                ""
                if target is None
                else f" (target <= {target}x: {'met' if ratio <= target else 'missed'})"
            )
            print(f"kitchen / {other} = {ratio:.2f}x{verdict}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=4, help="prompts (groups) per step")
    parser.add_argument("--group-size", type=int, default=8, help="samples per prompt")
    parser.add_argument("--max-tokens", type=int, default=8, help="completion length cap")
    parser.add_argument("--steps", type=int, default=4, help="RL steps per side")
    parser.add_argument("--learning-rate", type=float, default=3e-4)
    parser.add_argument("--max-operand", type=int, default=10)
    parser.add_argument("--dtype", choices=["auto", "bfloat16", "float32"], default="auto")
    parser.add_argument("--latency", type=float, default=0.2, help="(a) seconds per sample call")
    parser.add_argument("--skip-steps", action="store_true", help="run (a) only")
    parser.add_argument(
        "--sides", default=",".join(SIDES), help=f"(b) comma-separated, of {', '.join(SIDES)}"
    )
    parser.add_argument("--side", choices=SIDES, help=argparse.SUPPRESS)
    args = parser.parse_args()
    dtype = args.dtype
    if dtype == "auto":
        from kitchen.adapters.local.model.settings import cpu_has_native_bf16

        dtype = "bfloat16" if cpu_has_native_bf16() else "float32"
    s = StepSettings(
        args.groups,
        args.group_size,
        args.max_tokens,
        args.steps,
        args.learning_rate,
        args.max_operand,
        dtype,
    )
    if args.side:
        run_one(args.side, s)
        return
    bench_concurrency(8, args.group_size, args.latency)
    if args.skip_steps:
        return
    sides = [x for x in args.sides.split(",") if x]
    unknown = set(sides) - set(SIDES)
    if unknown:
        raise SystemExit(f"bench/rl.py: unknown sides {sorted(unknown)}; expected {list(SIDES)}")
    if "trl" in sides and importlib.util.find_spec("trl") is None:
        print(
            "(b) TRL is not installed (`.venv/bin/pip install trl --no-deps`, bench only): skipped"
        )
        sides.remove("trl")
    argv = [
        *("--groups", str(s.groups), "--group-size", str(s.group_size)),
        *("--max-tokens", str(s.max_tokens), "--steps", str(s.steps)),
        *("--learning-rate", str(s.learning_rate), "--max-operand", str(s.max_operand)),
        *("--dtype", dtype),
    ]
    bench_steps(s, sides, argv)


if __name__ == "__main__":
    main()
