"""What bench/rl.py and bench/dpo.py share: one side per fresh process, and what a side pushes
through the model.

Every side (Kitchen, TRL, a hand-written loop) runs in its own child process, so none inherits
another's memory, threads, caches or imported monkey-patches; the child prints one `RESULT {json}`
line that the parent collects. `TokenCount` wraps the decoder's forward (SmolLM2 is a Llama) to
count the tokens every pass pushes through the model, real (the attention mask's ones among the new
positions) and padded (batch x length), split into passes with and without grad. Kitchen's real
update tokens are its data's (its passes carry no mask); it runs a prefix that rows share once, so
its padded count can be the smaller one.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass
class TokenCount:
    """Tokens through LlamaModel.forward: [real, padded] for grad (update) and no-grad passes.
    A pass without a 2D mask counts every position as real: the caller knows better (see `real`)."""

    grad: list[int] = field(default_factory=lambda: [0, 0])
    no_grad: list[int] = field(default_factory=lambda: [0, 0])
    passes: list[int] = field(default_factory=lambda: [0, 0])  # grad, no-grad forward calls
    nograd_seconds: float = 0.0  # wall time inside no-grad decoder forwards

    def install(self) -> TokenCount:
        import torch
        from transformers.models.llama import modeling_llama

        inner = modeling_llama.LlamaModel.forward

        def forward(
            model: Any, input_ids: Any = None, attention_mask: Any = None, **kw: Any
        ) -> Any:
            x = input_ids if input_ids is not None else kw["inputs_embeds"]
            b, t = int(x.shape[0]), int(x.shape[1])
            real = b * t
            if isinstance(attention_mask, torch.Tensor) and attention_mask.dim() == 2:
                real = int(attention_mask[:, -t:].sum())
            grad = torch.is_grad_enabled()
            counts = self.grad if grad else self.no_grad
            counts[0] += real
            counts[1] += b * t
            self.passes[0 if grad else 1] += 1
            t0 = time.perf_counter()
            out = inner(model, input_ids=input_ids, attention_mask=attention_mask, **kw)
            if not grad:
                self.nograd_seconds += time.perf_counter() - t0
            return out

        modeling_llama.LlamaModel.forward = forward  # type: ignore[method-assign]
        return self

    def per_step(self, steps: int) -> dict[str, float]:
        return {
            "update_real": self.grad[0] / steps,
            "update_padded": self.grad[1] / steps,
            "nograd_real": self.no_grad[0] / steps,
            "nograd_padded": self.no_grad[1] / steps,
            "update_passes": self.passes[0] / steps,
            "nograd_passes": self.passes[1] / steps,
        }


def synchronize() -> None:
    """Wait for the accelerator's queued work, so a clock read next counts it: CUDA kernels run
    after the call that launched them returns, and an unsynchronised timer would hand the rest of
    one side's work to whatever it times next."""
    import torch

    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


def machine() -> dict[str, Any]:
    """Threads torch uses in this process and the 1-minute load average (other users included)."""
    import torch

    return {"threads": torch.get_num_threads(), "load": os.getloadavg()[0], "cpus": os.cpu_count()}


def peak_rss_kb() -> int:
    """This process's peak RSS in KiB. Linux's ru_maxrss keeps the peak of the image before exec,
    so a child of a big process would report its parent's; /proc's VmHWM is this image's own."""
    import resource
    from pathlib import Path

    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def emit(result: dict[str, Any]) -> None:
    """Child side: the one line the parent reads."""

    result["peak_rss_gb"] = peak_rss_kb() / 2**20
    result.update(machine())
    print("RESULT " + json.dumps(result), flush=True)


def side_or_parent(
    parser: argparse.ArgumentParser,
    sides: Sequence[str],
    side: Callable[[argparse.Namespace], None],
) -> argparse.Namespace | None:
    """Parse the command line. In a child `run_side` started (its `--side NAME`), run `side` and
    return None; in the parent, return the arguments."""
    parser.add_argument("--side", choices=sides, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.side:
        side(args)
        return None
    return args


def run_side(script: str, side: str, argv: list[str]) -> dict[str, Any]:
    """Parent side: `script argv --side side` in a fresh interpreter; its RESULT as a dict."""
    cmd = [sys.executable, script, *argv, "--side", side]
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    lines = [line for line in out.stdout.splitlines() if line.startswith("RESULT ")]
    if out.returncode != 0 or not lines:
        raise SystemExit(
            f"bench: the {side} side failed (exit {out.returncode}):\n{out.stderr[-4000:]}"
        )
    return dict(json.loads(lines[-1][len("RESULT ") :]))


def steady(seconds: list[float]) -> float:
    """Median of the steps after the first (which pays warm-up: allocator, kernels, lazy imports)."""
    return statistics.median(seconds[1:] if len(seconds) > 1 else seconds)


def table(results: dict[str, dict[str, Any]], phases: list[str]) -> None:
    """One row per side: s/step (wall), CPU s/step (this process, every thread), the phase breakdown, tokens real/padded, threads, load, RSS."""
    head = f"{'side':22s} {'s/step':>7s} {'cpu s':>6s} " + " ".join(f"{p:>8s}" for p in phases)
    print(head + "  update tok real/pad  no-grad tok real/pad  thr  load  RSS GB")
    for side, r in results.items():
        phase = " ".join(f"{r['phases'].get(p, 0.0):8.2f}" for p in phases)
        t = r["tokens"]
        print(
            f"{side:22s} {steady(r['seconds']):7.2f} {steady(r['cpu']):6.2f} {phase}  "
            f"{t['update_real']:7.0f}/{t['update_padded']:<8.0f}   "
            f"{t['nograd_real']:7.0f}/{t['nograd_padded']:<8.0f}    "
            f"{r['threads']:3d} {r['load']:5.1f}  {r['peak_rss_gb']:5.2f}"
        )


class StagePhases:
    """A Kitchen run hook: wall and CPU seconds per step, its stages' seconds summed into phases
    (`phase_of(stage name)`)."""

    def __init__(self, phase_of: Callable[[str], str]) -> None:
        self.phase_of = phase_of
        self.seconds: list[float] = []
        self.cpu: list[float] = []
        self.steps: list[dict[str, float]] = []
        self.current: dict[str, float] = {}
        self.cpu0 = time.process_time()

    def on_stage_end(self, path: str, name: str, seconds: float, metrics: Any) -> None:
        phase = self.phase_of(name)
        self.current[phase] = self.current.get(phase, 0.0) + seconds

    def on_step_end(self, step: int, metrics: dict[str, Any]) -> None:
        self.seconds.append(float(metrics["time/total"]))
        self.cpu.append(time.process_time() - self.cpu0)
        self.cpu0 = time.process_time()
        self.steps.append(self.current)
        self.current = {}

    def __getattr__(self, name: str) -> Any:  # the other Hook methods: nothing to do
        if name.startswith("on_"):
            return lambda *a, **k: None
        raise AttributeError(name)


def median_phases(steps: list[dict[str, float]], phases: list[str]) -> dict[str, float]:
    """Per phase, the median over the steps after the first."""
    rest = steps[1:] or steps
    return {p: statistics.median(s.get(p, 0.0) for s in rest) for p in phases}


def lora_model(name: str, rank: int) -> tuple[Any, Any, Any]:
    """The model in fp32, its tokenizer (with a pad token) and Kitchen's LoRA config for it:
    attention + MLP, not lm_head (TRL computes logprobs from lm_head.weight and cannot adapt it)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from kitchen.adapters.local import resolve_model
    from kitchen.adapters.local.model.lora import LoraSpec, peft_config

    path = resolve_model(name)
    tokenizer = AutoTokenizer.from_pretrained(path)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(path, dtype="float32")
    return model, tokenizer, peft_config(model, LoraSpec(rank=rank, train_unembed=False))


def run_sides(script: str, sides: list[str], argv: list[str]) -> dict[str, dict[str, Any]]:
    """Each side in turn, in its own process; prints its step times and the data's mean lengths."""
    results = {}
    for side in sides:
        results[side] = r = run_side(script, side, argv)
        print(
            f"    {side:20s} steps {[round(t, 2) for t in r['seconds']]}  prompt tokens "
            f"{r['prompt_tokens']:.1f}, completion tokens {r['completion_tokens']:.2f} (means)  "
            f"dtype {r['dtype']}",
            flush=True,
        )
    return results


def add_time(obj: Any, method: str, current: Callable[[], dict[str, float]], phase: str) -> None:
    """Wrap obj.method (an instance's or a class's) so its wall time adds to `phase` of the
    dict `current()` returns (the step running)."""
    inner = getattr(obj, method)

    def timed(*a: Any, **k: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return inner(*a, **k)
        finally:
            step = current()
            step[phase] = step.get(phase, 0.0) + time.perf_counter() - t0

    setattr(obj, method, timed)


def count_update_plans() -> list[int]:
    """[real, padded] tokens of the micro-batches the engine plans for training passes: what the
    update pushes through the model (its passes carry no attention mask, so the forward hook cannot
    tell real from padded). Reference scoring plans its micro-batches the same way since scored
    requests share passes; those are left out, so the count is the update's alone."""
    import threading

    from kitchen.adapters.local.train import forward as local_forward

    planned = [0, 0]
    scoring = threading.local()
    # Scoring reads score_sequences from forward.py at each call (executor.py).
    plan, score = local_forward.plan_microbatches, local_forward.score_sequences

    def counted_plan(*a: Any, **k: Any) -> Any:
        batches = plan(*a, **k)
        if not getattr(scoring, "on", False):
            planned[0] += sum(sum(b.lengths) for b in batches)
            planned[1] += sum(b.tokens.numel() for b in batches)
        return batches

    def flagged_score(*a: Any, **k: Any) -> Any:
        scoring.on = True
        try:
            return score(*a, **k)
        finally:
            scoring.on = False

    local_forward.plan_microbatches = counted_plan  # type: ignore[assignment]
    local_forward.score_sequences = flagged_score
    return planned
