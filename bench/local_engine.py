"""Throughput of the local engine against the plain loops it replaces, on the same model and batch.

    .venv/bin/python bench/local_engine.py                       # tiny model, seconds
    .venv/bin/python bench/local_engine.py --model smollm2-135m  # SmolLM2-135M, a few minutes on CPU
    .venv/bin/python bench/local_engine.py --size 1b --device cuda --batch 16 --seq 512
                                                                 # the issue-28 GPU row (docs/gpu.md)

Training, once per --dtypes entry: LoRA forward_backward(cross_entropy) + optim_step through the
engine's futures, against a hand-written torch + peft loop in the same dtype (fp32 weights, bf16 as
autocast; same LoRA config, AdamW, summed token cross-entropy).
Sampling: the engine's sampler on the base model against `model.generate` (same number of new
tokens, stop disabled, multinomial sampling, num_samples sequences of one prompt); then 4 prompts x
8 samples as 32 concurrent one-sample requests (one shared decode batch) against 4 calls of 8
awaited one after another (one prompt per call); when --sampling-dtype is not float32, also against
those 4 calls in float32 in a fresh process, the path the engine had before the shared batch.
DPO memory: peak RSS of a fresh process running one forward_backward_custom of --dpo-pairs pairs of
--dpo-seq tokens (a DPO loss; the reference logprobs are constants here).
Each timing is the best of --repeats interleaved runs, by wall clock and by process CPU time; on a
GPU every timed run ends with a device synchronize, so none leaves kernels for the next to pay.
--model / --size / --tokenizer / --device: bench/models.py.
The plain loops load and run on the engine's compute thread (`backend.compute.run`): every thread
that runs torch gets its own OpenMP team, and a second team on a small machine slows both sides
(libgomp stops spinning once teams outnumber the cores), which a standalone script never pays.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# Importing kitchen chooses OpenMP's wait policy (kitchen/engine/cores.py), which torch reads as it loads.
import kitchen  # noqa: F401

# isort: split
import numpy as np
import torch
from model_options import add_model_options, resolve_model_options
from sides import synchronize
from tinker import types

from kitchen.adapters.local import create_local_backend, resolve_model
from kitchen.adapters.local.model.lora import LoraSpec, peft_config
from kitchen.ports import BackendSettings


@dataclass(frozen=True)
class Pair:
    """Best wall and CPU seconds of the engine and of the plain loop it is compared with."""

    engine_wall: float
    plain_wall: float
    engine_cpu: float
    plain_cpu: float

    def report(self, tokens: int, plain_name: str, target: float) -> None:
        print(f"  engine    {tokens / self.engine_wall:10.1f} tokens/s")
        print(f"  {plain_name:<9} {tokens / self.plain_wall:10.1f} tokens/s")
        print(f"  ratio     {self.plain_wall / self.engine_wall:10.2f}x wall  (target >= {target})")
        print(f"            {self.plain_cpu / self.engine_cpu:10.2f}x CPU time")


def best_times(first: Callable[[], None], second: Callable[[], None], repeats: int) -> Pair:
    """Best wall and process-CPU time of each; runs interleaved so outside load hits both alike.
    On a shared machine the CPU-time ratio is the steadier one (a descheduled run costs no CPU)."""
    wall: tuple[list[float], list[float]] = ([], [])
    cpu: tuple[list[float], list[float]] = ([], [])
    for _ in range(repeats):
        for i, fn in enumerate((first, second)):
            start_wall, start_cpu = time.perf_counter(), time.process_time()
            fn()
            wall[i].append(time.perf_counter() - start_wall)
            cpu[i].append(time.process_time() - start_cpu)
    return Pair(min(wall[0]), min(wall[1]), min(cpu[0]), min(cpu[1]))


def make_batch(vocab: int, batch: int, seq: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.integers(10, vocab, size=(batch, seq + 1), dtype=np.int64)


def bench_training(
    args: argparse.Namespace, backend: Any, tokens_BS: np.ndarray
) -> tuple[Pair, int]:
    adam = types.AdamParams(learning_rate=1e-4)
    data = [
        types.Datum(
            model_input=types.ModelInput.from_ints(row[:-1].tolist()),
            loss_fn_inputs={
                "target_tokens": types.TensorData.from_numpy(row[1:]),
                "weights": types.TensorData.from_numpy(np.ones(len(row) - 1, dtype=np.float32)),
            },
        )
        for row in tokens_BS
    ]
    client = backend.create_lora_training_client(args.model, rank=args.rank)

    def engine_steps() -> None:
        for _ in range(args.steps):
            fb = client.forward_backward(data, "cross_entropy")
            opt = client.optim_step(adam)
            fb.result()
            opt.result()
        backend.compute.run(synchronize)  # the last optimizer step's kernels

    pair = _pair_on_engine_thread(
        backend, engine_steps, lambda: _hand_loop(args, backend, tokens_BS), args.repeats
    )
    return pair, tokens_BS.shape[0] * (tokens_BS.shape[1] - 1) * args.steps


def _hand_loop(args: argparse.Namespace, backend: Any, tokens_BS: np.ndarray) -> Callable[[], None]:
    """The baseline: the loop a user would write by hand on the same model."""
    import contextlib

    from peft import get_peft_model
    from transformers import AutoModelForCausalLM

    device = backend.settings.device
    autocast = backend.settings.autocast_dtype
    model = AutoModelForCausalLM.from_pretrained(resolve_model(args.model)).to(device).eval()
    model = get_peft_model(model, peft_config(model, LoraSpec(rank=args.rank)))
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=1e-4, betas=(0.9, 0.95), eps=1e-12, foreach=True)
    inputs = torch.from_numpy(tokens_BS[:, :-1]).to(device)
    targets = torch.from_numpy(tokens_BS[:, 1:]).to(device)

    def baseline_steps() -> None:
        for _ in range(args.steps):
            with (
                torch.autocast(torch.device(device).type, dtype=autocast)
                if autocast is not None
                else contextlib.nullcontext()
            ):
                logits = model(input_ids=inputs, use_cache=False).logits
                loss = torch.nn.functional.cross_entropy(
                    logits.flatten(0, 1).float(), targets.flatten(), reduction="sum"
                )
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        synchronize()

    return baseline_steps


def _pair_on_engine_thread(
    backend: Any,
    engine: Callable[[], None],
    make_plain: Callable[[], Callable[[], None]],
    repeats: int,
) -> Pair:
    """Warm both up, then time them interleaved; the plain side is built and run on the engine's
    compute thread so the process keeps one OpenMP team (see the module docstring)."""
    plain = backend.compute.run(make_plain)

    def plain_on_thread() -> None:
        backend.compute.run(plain)

    engine()  # warm up allocators and kernels
    plain_on_thread()
    return best_times(engine, plain_on_thread, repeats)


def _base_sampler(args: argparse.Namespace) -> tuple[Any, Any]:
    """A fresh backend in --sampling-dtype (its base model carries no LoRA wrappers from the
    training benchmark) and a sampler of its base model."""
    backend = create_local_backend(
        BackendSettings(seed=0, device=args.device, dtype=args.sampling_dtype)
    )
    return backend, backend.create_sampling_client(base_model=args.model)


def bench_sampling(args: argparse.Namespace, prompt: list[int]) -> tuple[Pair, int]:
    backend, sampler = _base_sampler(args)
    params = types.SamplingParams(max_tokens=args.new_tokens, stop=[], seed=0)
    model_input = types.ModelInput.from_ints(prompt)

    def engine_sample() -> None:
        response = sampler.sample(model_input, args.num_samples, params).result()
        assert all(len(s.tokens) == args.new_tokens for s in response.sequences)

    pair = _pair_on_engine_thread(
        backend, engine_sample, lambda: _hf_generate(args, backend, prompt), args.repeats
    )
    backend.close()
    return pair, args.num_samples * args.new_tokens


def _hf_generate(args: argparse.Namespace, backend: Any, prompt: list[int]) -> Callable[[], None]:
    """The baseline: `model.generate` on a second copy of the model."""
    from transformers import AutoModelForCausalLM

    settings = backend.settings
    model: Any = AutoModelForCausalLM.from_pretrained(resolve_model(args.model))
    model = model.to(settings.device).eval()
    ids = torch.tensor([prompt], device=settings.device)

    def generate_sample() -> None:
        with (
            torch.inference_mode(),
            torch.autocast(
                torch.device(settings.device).type,
                dtype=settings.autocast_dtype,
                enabled=settings.autocast_dtype is not None,
            ),
        ):
            out = model.generate(
                ids,
                attention_mask=torch.ones_like(ids),
                do_sample=True,
                temperature=1.0,
                top_k=0,
                top_p=1.0,
                max_new_tokens=args.new_tokens,
                min_new_tokens=args.new_tokens,
                num_return_sequences=args.num_samples,
                pad_token_id=0,
            )
        synchronize()
        assert out.shape[1] == len(prompt) + args.new_tokens

    return generate_sample


def _sample_calls(
    sampler: Any, prompts: list[list[int]], new_tokens: int
) -> tuple[Callable[[], None], Callable[[], None]]:
    """(32 one-sample requests in flight at once, 4 calls of 8 awaited one after another)."""
    params = types.SamplingParams(max_tokens=new_tokens, stop=[], seed=0)
    inputs = [types.ModelInput.from_ints(p) for p in prompts]

    def concurrent() -> None:
        futures = [sampler.sample(m, 1, params) for m in inputs for _ in range(8)]
        assert all(len(f.result().sequences[0].tokens) == new_tokens for f in futures)

    def one_prompt_per_call() -> None:
        for m in inputs:
            assert len(sampler.sample(m, 8, params).result().sequences) == 8

    return concurrent, one_prompt_per_call


def bench_concurrent_sampling(args: argparse.Namespace, prompts: list[list[int]]) -> Pair:
    """32 one-sample requests in flight at once (first) against 4 calls of 8, one at a time."""
    backend, sampler = _base_sampler(args)
    concurrent, one_prompt_per_call = _sample_calls(sampler, prompts, args.new_tokens)
    concurrent()
    one_prompt_per_call()
    pair = best_times(concurrent, one_prompt_per_call, args.repeats)
    backend.close()
    return pair


def per_call_side(args: argparse.Namespace, prompts: list[list[int]]) -> None:
    """Child process (--side per-call): the one-prompt-per-call path alone in --sampling-dtype,
    best of --repeats; prints its tokens/s as a RESULT line."""
    from sides import emit

    backend, sampler = _base_sampler(args)
    _, one_prompt_per_call = _sample_calls(sampler, prompts, args.new_tokens)
    one_prompt_per_call()
    seconds = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        one_prompt_per_call()
        seconds.append(time.perf_counter() - start)
    emit({"tokens_per_s": 32 * args.new_tokens / min(seconds), "dtype": backend.dtype_name})
    backend.close()


def dpo_peak_rss(args: argparse.Namespace) -> None:
    """Run in a fresh process (--dpo-only): one DPO forward_backward_custom, then print peak RSS."""
    backend = create_local_backend(BackendSettings(seed=0, device=args.device))
    client = backend.create_lora_training_client(args.model, rank=args.rank)
    vocab = client.host.base.config.vocab_size
    rows = make_batch(vocab, 2 * args.dpo_pairs, args.dpo_seq, seed=1)
    data = [
        types.Datum(
            model_input=types.ModelInput.from_ints(row[:-1].tolist()),
            loss_fn_inputs={"target_tokens": types.TensorData.from_numpy(row[1:])},
        )
        for row in rows
    ]

    def dpo(_: list[types.Datum], logprobs: list[torch.Tensor]) -> tuple[Any, dict[str, float]]:
        sums = torch.stack([lp.sum() for lp in logprobs])
        margin = sums[0::2] - sums[1::2]  # reference logprobs cancel to a constant here
        return -torch.nn.functional.logsigmoid(0.1 * margin).sum(), {}

    start = time.perf_counter()
    client.forward_backward_custom(data, dpo).result()
    seconds = time.perf_counter() - start
    from sides import peak_rss_kb

    peak_gb = peak_rss_kb() / 1e6
    print(
        f"dpo       forward_backward_custom {args.dpo_pairs} pairs x {args.dpo_seq} tokens "
        f"({backend.dtype_name}): {seconds:.1f} s, peak RSS {peak_gb:.2f} GB (target <= 3)"
    )
    backend.close()


def _sampling_prompts(args: argparse.Namespace) -> np.ndarray:
    return make_batch(49_000 if "smollm" in args.model else 500, 4, args.prompt_len, 2)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_model_options(parser, default_model="kitchen/tiny-llama")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--rank", type=int, default=16)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--num-samples", type=int, default=8)
    parser.add_argument("--prompt-len", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--dtypes", default="float32,auto", help="training rows, comma-separated")
    parser.add_argument("--sampling-dtype", default="float32")
    parser.add_argument("--dpo-pairs", type=int, default=64)
    parser.add_argument("--dpo-seq", type=int, default=256)
    parser.add_argument("--only", choices=["training", "sampling", "dpo"], default=None)
    parser.add_argument("--side", choices=["per-call"], default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    resolve_model_options(args)
    if args.side == "per-call":
        per_call_side(args, [r.tolist() for r in _sampling_prompts(args)])
        return
    print(f"torch threads {torch.get_num_threads()}, device {args.device}, model {args.model}")

    if args.only in (None, "training"):
        tokens_per_s: dict[str, float] = {}
        for dtype in args.dtypes.split(","):
            backend = create_local_backend(BackendSettings(seed=0, device=args.device, dtype=dtype))
            vocab = backend.shared_host(args.model).base.config.vocab_size
            tokens_BS = make_batch(vocab, args.batch, args.seq, seed=0)
            training, train_tokens = bench_training(args, backend, tokens_BS)
            name = f"{dtype} -> {backend.dtype_name}"
            tokens_per_s[name] = train_tokens / training.engine_wall
            print(
                f"training  {name} (LoRA r={args.rank}, {args.batch} x {args.seq}, {args.steps} steps)"
            )
            training.report(train_tokens, "hand loop", 0.9)
            backend.close()
        names = list(tokens_per_s)
        if len(names) == 2:
            ratio = tokens_per_s[names[1]] / tokens_per_s[names[0]]
            print(f"  engine {names[1]} / {names[0]}: {ratio:.2f}x tokens/s")
    if args.only in (None, "sampling"):
        vocab_rows = _sampling_prompts(args)
        prompt = vocab_rows[0, : args.prompt_len].tolist()
        sampling, sample_tokens = bench_sampling(args, prompt)
        print(
            f"sampling  ({args.num_samples} x {args.new_tokens} new tokens, prompt {args.prompt_len})"
        )
        sampling.report(sample_tokens, "generate", 1.0)
        prompts = [r.tolist() for r in vocab_rows]
        concurrent = bench_concurrent_sampling(args, prompts)
        print(
            f"sampling  32 concurrent requests (4 prompts x 8) vs 4 calls of 8, one at a time "
            f"({args.sampling_dtype})"
        )
        concurrent.report(32 * args.new_tokens, "per-call", 3.0)
        if args.sampling_dtype != "float32":
            # The path the engine had before the shared decode batch: fp32 on CPU, one prompt per
            # call. A fresh process, so the two sides share no threads or caches.
            from sides import run_side

            argv = [*sys.argv[1:], "--sampling-dtype", "float32"]
            before = run_side(__file__, "per-call", argv)["tokens_per_s"]
            now = 32 * args.new_tokens / concurrent.engine_wall
            print(
                f"  32 concurrent ({args.sampling_dtype}) / 4 calls of 8 in float32, fresh process: "
                f"{now:.1f} / {before:.1f} tokens/s = {now / before:.2f}x (target >= 3)"
            )
    if args.only in (None, "dpo"):
        if args.only is None:  # peak RSS needs a process of its own
            import subprocess

            subprocess.run([sys.executable, *sys.argv, "--only", "dpo"], check=True)
        else:
            dpo_peak_rss(args)


if __name__ == "__main__":
    main()
