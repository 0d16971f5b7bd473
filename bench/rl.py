"""RL rollout concurrency, and seconds per RL step against TRL's GRPOTrainer (same run).

    .venv/bin/python bench/rl.py                      # (a) only takes seconds; (b) minutes on CPU
    .venv/bin/python bench/rl.py --skip-trl           # (a) and the local engine's step time
    .venv/bin/python bench/rl.py --steps 4 --groups 4 --group-size 8 --max-tokens 8

(a) A sampler that takes a fixed latency per call: a batch of G groups of N envs should finish in
    about one latency (every group is its own task, a group's N prompts one call), not G*N.
(b) Seconds per RL step: Kitchen's rl_basic workflow on the local engine against TRL's GRPOTrainer,
    same model (SmolLM2-135M-Instruct), LoRA (rank 32, alpha 32, same modules but lm_head, which
    TRL cannot adapt), the same prompt
    text (the arithmetic env's rendered prompts), group size, prompts per step, completion length,
    learning rate, temperature 1, no KL. A step = sample G*N completions, score, one update.
    TRL is not a dependency of Kitchen: install it into the venv for this bench only
    (`.venv/bin/pip install trl`); without it (b) prints a note and runs the Kitchen side only.
Target: Kitchen's step time at most 1.0x TRL's.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any, cast

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np
from tinker import types

MODEL = "HuggingFaceTB/SmolLM2-135M-Instruct"


# ---------------------------------------------------------------------------------------------
# (a) rollout concurrency against a fixed-latency sampler


@dataclass
class LatencySampler:
    """Answers every sample() call after `latency` seconds; counts calls."""

    latency: float
    calls: list[int] = field(default_factory=list)

    def sample(self, prompt: Any, num_samples: int, sampling_params: Any) -> Any:
        self.calls.append(num_samples)

        async def respond() -> types.SampleResponse:
            await asyncio.sleep(self.latency)
            seqs = [
                types.SampledSequence(
                    stop_reason="stop",
                    sequence_id=f"s{i}",
                    tokens_np=np.asarray([ord("7"), 258], dtype=np.int32),
                    logprobs_np=np.asarray([-0.5, -0.1], dtype=np.float32),
                )
                for i in range(num_samples)
            ]
            return types.SampleResponse(sequences=seqs)

        return respond()


def bench_concurrency(groups: int, group_size: int, latency: float) -> None:
    from cookbook.envs.arithmetic import ArithmeticEnvs
    from kitchen.adapters.fake.tokenizer import FakeTokenizer
    from kitchen.workflows.reinforcement.rollout import make_policy
    from kitchen.workflows.reinforcement.stages import RLEnvContext
    from train_core.renderers import get_renderer
    from train_core.rl import do_batch_rollouts

    renderer = get_renderer("chatml", FakeTokenizer())
    train, _ = ArithmeticEnvs(groups, group_size, test_problems=0)(
        RLEnvContext(renderer, renderer.tokenizer)
    )
    print(f"(a) {groups} groups x {group_size} envs, sampler latency {latency:.2f} s per call")
    for coalesce in (True, False):
        sampler = LatencySampler(latency)
        policy = make_policy(sampler, max_tokens=8, temperature=1.0, coalesce=coalesce)

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
# (b) seconds per RL step: Kitchen local engine vs TRL GRPOTrainer


@dataclass
class StepSettings:
    groups: int
    group_size: int
    max_tokens: int
    steps: int
    learning_rate: float
    max_operand: int


def kitchen_step_seconds(s: StepSettings) -> list[float]:
    from kitchen.app.launch import run

    with tempfile.TemporaryDirectory() as log_dir:
        result = run(
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
            backend="local",
            log_dir=log_dir,
        )
    return [m["time/total"] for m in result.metrics if "time/total" in m]


def arithmetic_prompts(s: StepSettings, tokenizer: Any) -> list[dict[str, Any]]:
    """The rl_basic prompts (few-shot + question) as the text our chatml renderer produces."""
    from cookbook.envs.arithmetic import ArithmeticEnvs
    from kitchen.workflows.reinforcement.stages import RLEnvContext
    from train_core.renderers import get_renderer

    renderer = get_renderer("chatml", tokenizer)
    train, _ = ArithmeticEnvs(s.groups, s.group_size, s.steps, s.max_operand, test_problems=0)(
        RLEnvContext(renderer, tokenizer)
    )
    rows = []
    for i in range(s.steps):
        for builder in train.get_batch(i):
            env = cast(Any, builder).env_thunk()
            prompt = renderer.build_generation_prompt(env._conversation())
            rows.append(
                {
                    "prompt": tokenizer.decode(prompt.to_ints()),
                    "answer": env.get_reference_answer(),
                }
            )
    return rows


def trl_step_seconds(s: StepSettings) -> list[float] | None:
    try:
        import trl  # noqa: F401
    except ImportError:
        print(
            "(b) TRL is not installed: skipping the TRL side. Install it for this bench only with "
            "`.venv/bin/pip install trl` (never a Kitchen dependency)."
        )
        return None
    import datasets
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from cookbook.envs.arithmetic import extract_final_int
    from kitchen.adapters.local import resolve_model

    path = str(resolve_model(MODEL))
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype="float32")
    rows = arithmetic_prompts(s, tokenizer)

    def reward(completions: list[str], answer: list[str], **_: Any) -> list[float | None]:
        # the arithmetic env's reward: correct, minus 0.1 without the stop token
        out: list[float | None] = []
        for text, ref in zip(completions, answer, strict=True):
            stopped = (
                text.endswith(tokenizer.eos_token) or len(tokenizer.encode(text)) < s.max_tokens
            )
            out.append(float(extract_final_int(text) == int(ref)) + 0.1 * (float(stopped) - 1))
        return out

    times: list[float] = []

    class StepTimer(TrainerCallback):
        def on_step_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            self.t0 = time.perf_counter()

        def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            times.append(time.perf_counter() - self.t0)

    from kitchen.adapters.local.lora import LoraSpec, lora_targets

    # TRL refuses a LoRA on lm_head (it reads lm_head.weight directly); Kitchen also adapts the
    # unembedding, about 1% more FLOPs per token for SmolLM2, so this favours TRL slightly.
    targets = [t for t in lora_targets(model, LoraSpec(rank=32)) if t != "lm_head"]
    with tempfile.TemporaryDirectory() as out:
        config = GRPOConfig(
            output_dir=out,
            per_device_train_batch_size=s.groups * s.group_size,
            gradient_accumulation_steps=1,
            num_generations=s.group_size,
            max_completion_length=s.max_tokens,
            learning_rate=s.learning_rate,
            lr_scheduler_type="constant",
            warmup_steps=0,
            beta=0.0,
            temperature=1.0,
            max_steps=s.steps,
            logging_steps=1,
            save_strategy="no",
            report_to="none",
            use_cpu=True,
            bf16=False,
            # TRL turns gradient checkpointing on by default; Kitchen's engine does not checkpoint,
            # and with it on generation runs without a KV cache.
            gradient_checkpointing=False,
            shuffle_dataset=False,
            dataloader_num_workers=0,
            seed=0,
        )
        trainer = GRPOTrainer(
            model=model,
            reward_funcs=reward,
            args=config,
            train_dataset=datasets.Dataset.from_list(rows),
            processing_class=tokenizer,
            peft_config=LoraConfig(r=32, lora_alpha=32, lora_dropout=0.0, target_modules=targets),
            callbacks=[StepTimer()],
        )
        trainer.train()
    return times


def summary(times: list[float]) -> str:
    steady = times[1:] or times  # the first step pays one-off costs (model load, warm-up)
    return f"median {statistics.median(steady):.2f} s, min {min(steady):.2f} s over {len(steady)} steps"


def bench_steps(s: StepSettings, skip_trl: bool, skip_kitchen: bool = False) -> None:
    print(
        f"(b) RL step on {MODEL}: {s.groups} prompts x {s.group_size} samples, "
        f"{s.max_tokens} new tokens max, {s.steps} steps (first step excluded)"
    )
    ours = [] if skip_kitchen else kitchen_step_seconds(s)
    if ours:
        print(f"    kitchen local engine: {summary(ours)}  all: {[round(t, 2) for t in ours]}")
    if skip_trl:
        return
    theirs = trl_step_seconds(s)
    if theirs is None or not ours:
        if theirs:
            print(
                f"    TRL GRPOTrainer:      {summary(theirs)}  all: {[round(t, 2) for t in theirs]}"
            )
        return
    print(f"    TRL GRPOTrainer:      {summary(theirs)}  all: {[round(t, 2) for t in theirs]}")
    ratio = statistics.median(ours[1:] or ours) / statistics.median(theirs[1:] or theirs)
    verdict = "meets" if ratio <= 1.0 else "misses"
    print(f"    kitchen / TRL = {ratio:.2f}x ({verdict} the <= 1.0x target)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=4, help="prompts (groups) per step")
    parser.add_argument("--group-size", type=int, default=8, help="samples per prompt")
    parser.add_argument("--max-tokens", type=int, default=8, help="completion length cap")
    parser.add_argument("--steps", type=int, default=4, help="RL steps per side")
    parser.add_argument("--learning-rate", type=float, default=3e-4)
    parser.add_argument("--max-operand", type=int, default=10)
    parser.add_argument("--latency", type=float, default=0.2, help="(a) seconds per sample call")
    parser.add_argument("--skip-steps", action="store_true", help="run (a) only")
    parser.add_argument("--skip-trl", action="store_true", help="(b) without the TRL side")
    parser.add_argument("--skip-kitchen", action="store_true", help="(b) the TRL side only")
    args = parser.parse_args()
    bench_concurrency(8, args.group_size, args.latency)
    if not args.skip_steps:
        settings = StepSettings(
            args.groups,
            args.group_size,
            args.max_tokens,
            args.steps,
            args.learning_rate,
            args.max_operand,
        )
        bench_steps(settings, args.skip_trl, args.skip_kitchen)


if __name__ == "__main__":
    main()
