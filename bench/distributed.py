"""`kitchen run sl_basic --nproc N`: each rank's peak memory and the run's tokens/s, at N=1 and N=2
(issue 34).

    .venv/bin/python bench/distributed.py                  # SmolLM2-135M, 4 steps at N=1 and N=2
    .venv/bin/python bench/distributed.py --nprocs 1,2 --steps 6
    .venv/bin/python bench/distributed.py --base-bytes   # the base's parameter storage per rank
    .venv/bin/python bench/distributed.py --lora-rank 0  # full fine-tuning: weights, gradients
                                                         # and AdamW state sharded

Per rank it prints the peak resident memory (VmHWM) over the steady steps: the peak is reset
(/proc/PID/clear_refs) once the first step is in metrics.jsonl, so loading the model whole before
it is sharded, which every rank does, is not counted; with it, the peak at load (VmHWM before the
reset). Also the median step time after the first, and tokens/s (num_tokens / time/total), with the
torch threads each rank ran on (the launcher splits the cores: cores // N). Linux only (/proc).
Other work on the machine changes the times, not the memory: note the load it prints.

--base-bytes instead counts the bytes of the base's parameter storage each of 2 ranks holds (shards
and whatever is gathered whole: the root, a decoder layer, a block of the vocabulary), between
calls and at its most during one training pass (the decoder and the head, forward and backward,
on 2 rows of 128 tokens, LoRA on q_proj and the head), against the whole model: the memory the
sharding is about, without the activations, allocator and libraries that resident memory adds.
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Rank:
    pid: int
    load_peak_kb: int = 0  # VmHWM when the first step was done
    steady_peak_kb: int = 0  # VmHWM since then
    threads: str = "?"


@dataclass
class Result:
    nproc: int
    ranks: dict[str, Rank] = field(default_factory=dict)
    steps: list[dict[str, float]] = field(default_factory=list)


def _status(pid: int, key: str) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    except OSError:
        return None  # gone
    return None


def _env_of(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(e.decode(errors="replace").split("=", 1) for e in raw if b"=" in e)


def _ranks(launcher: int, nproc: int) -> dict[str, Rank]:
    """Rank number -> its process: the launcher itself at N=1, its children otherwise."""
    if nproc == 1:
        return {"0": Rank(launcher, threads=_env_of(launcher).get("OMP_NUM_THREADS", "?"))}
    kids = Path(f"/proc/{launcher}/task/{launcher}/children").read_text().split()
    out = {}
    for pid in map(int, kids):
        env = _env_of(pid)
        if "RANK" in env:
            out[env["RANK"]] = Rank(pid, threads=env.get("OMP_NUM_THREADS", "?"))
    return out


def _steps(log_dir: Path) -> list[dict[str, float]]:
    path = log_dir / "metrics.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    return [r for r in map(json.loads, lines) if "time/total" in r]


def run(args: argparse.Namespace, nproc: int, root: Path) -> Result:
    log_dir = root / f"nproc{nproc}"
    flags = ["--model", args.model, "--max-steps", str(args.steps), "--batch-size", str(args.batch)]
    flags += ["--eval-every", "0", "--num-samples-to-show", "0", "--save-every", "0"]
    flags += ["--test-dataset", "None", "--no-register-model", "--no-progress"]
    flags += ["--log-dir", str(log_dir), "--nproc", str(nproc)]
    if args.lora_rank is not None:
        flags.append(f"lora_rank={args.lora_rank}")
    env = dict(os.environ, HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    env.pop("OMP_NUM_THREADS", None)  # the launcher splits the cores between the ranks
    if nproc == 1:
        env["OMP_NUM_THREADS"] = str(os.cpu_count() or 1)
    cmd = [sys.executable, "-m", "kitchen.app.cli", "run", "sl_basic", *flags]
    err = (root / f"nproc{nproc}.err").open("wb")
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=err)
    result = Result(nproc)
    deadline = time.monotonic() + args.timeout
    while proc.poll() is None and time.monotonic() < deadline:
        if not result.ranks and _steps(log_dir):
            result.ranks = _ranks(proc.pid, nproc)
            for r in result.ranks.values():
                r.load_peak_kb = _status(r.pid, "VmHWM") or 0
                Path(f"/proc/{r.pid}/clear_refs").write_text("5")  # the peak starts again here
        for r in result.ranks.values():
            r.steady_peak_kb = max(r.steady_peak_kb, _status(r.pid, "VmHWM") or 0)
        time.sleep(0.2)
    if proc.poll() is None:
        proc.kill()
        print(f"  N={nproc}: stopped after {args.timeout:.0f} s")
    elif proc.returncode:
        tail = (root / f"nproc{nproc}.err").read_text(errors="replace").strip().splitlines()[-1:]
        print(f"  N={nproc}: failed with exit code {proc.returncode}: {' '.join(tail)}")
    result.steps = _steps(log_dir)
    return result


def report(result: Result, baseline: Result | None) -> None:
    steady = result.steps[1:] or result.steps
    step_s = statistics.median(s["time/total"] for s in steady) if steady else float("nan")
    tokens = sum(s.get("num_tokens", 0) for s in steady)
    seconds = sum(s["time/total"] for s in steady)
    print(
        f"N={result.nproc}: median step {step_s:.2f} s, {tokens / seconds if seconds else 0:.0f} "
        f"tokens/s over steps 2..{len(result.steps)}"
    )
    for name, r in sorted(result.ranks.items()):
        ratio = ""
        if baseline is not None and baseline.ranks:
            ratio = f" ({r.steady_peak_kb / baseline.ranks['0'].steady_peak_kb:.2f}x N=1)"
        print(
            f"  rank {name}: {r.threads} threads, peak RSS at load {r.load_peak_kb / 1024:.0f} MiB, "
            f"over the steps {r.steady_peak_kb / 1024:.0f} MiB{ratio}"
        )


def base_bytes_rank(model_name: str) -> None:
    """One rank of --base-bytes (under torch.distributed.run)."""
    import weakref

    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    from peft import LoraConfig, get_peft_model

    from kitchen.adapters.local.distributed.sharded_base import ShardedBase, VocabShards
    from kitchen.adapters.local.model.host import load_host
    from kitchen.adapters.local.model.settings import EngineSettings
    from kitchen.ports import BackendSettings

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    model = load_host(model_name, EngineSettings.from_backend_settings(BackendSettings())).base
    whole = sum(p.numel() * p.element_size() for p in model.parameters())
    vocab = model.get_input_embeddings().num_embeddings
    base = ShardedBase(model, dist.get_world_size())
    gathered: list[weakref.ref[Any]] = []  # the vocabulary blocks gathered (alive until used)

    def held() -> int:
        total = 0
        for module in [*base.layers, base.root]:
            for group in module._get_fsdp_state()._fsdp_param_groups:
                for param in group.fsdp_params:
                    total += param._sharded_param_data.untyped_storage().nbytes()
                    unsharded = getattr(param, "_unsharded_param", None)
                    if unsharded is not None:  # storage of size 0 while resharded
                        total += unsharded.untyped_storage().nbytes()
        total += sum(shards.parameter.untyped_storage().nbytes() for shards in base.vocab)
        blocks = [ref() for ref in gathered]
        return total + sum(b.untyped_storage().nbytes() for b in blocks if b is not None)

    between, peak = held(), [0]

    def sample(*_: Any) -> None:
        peak[0] = max(peak[0], held())

    gather = VocabShards.block

    def block(self: VocabShards, k: int, dtype: Any) -> Any:
        out = gather(self, k, dtype)
        gathered.append(weakref.ref(out))
        sample()
        return out

    VocabShards.block = block  # type: ignore[method-assign]
    for layer in base.layers:  # FSDP's own pre-forward hook, which gathers it, runs first
        layer.register_forward_pre_hook(sample)
    peft = get_peft_model(model, LoraConfig(r=8, target_modules=["q_proj", "lm_head"]))
    with base.call(), torch.enable_grad():
        sample()
        ids = torch.randint(0, vocab, (2, 129))
        hidden = model.get_decoder()(input_ids=ids[:, :-1], use_cache=False).last_hidden_state
        logits = peft.get_output_embeddings()(hidden.flatten(0, 1))
        F.cross_entropy(logits.float(), ids[:, 1:].flatten()).backward()
    mib = 2**20
    print(
        f"rank {rank}: base parameters whole {whole / mib:.0f} MiB; held between calls "
        f"{between / mib:.0f} MiB ({between / whole:.2f}x); during a pass (decoder and head, "
        f"forward and backward) at most {peak[0] / mib:.0f} MiB ({peak[0] / whole:.2f}x)",
        flush=True,
    )
    dist.destroy_process_group()


def main() -> None:
    if os.environ.get("BENCH_BASE_BYTES_MODEL"):
        base_bytes_rank(os.environ["BENCH_BASE_BYTES_MODEL"])
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--nprocs", default="1,2", help="comma list of rank counts to run")
    parser.add_argument("--steps", type=int, default=4, help="training steps per run")
    parser.add_argument("--batch", type=int, default=8, help="conversations per step")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds a run may take")
    parser.add_argument("--base-bytes", action="store_true", help="count the base's bytes per rank")
    parser.add_argument(
        "--lora-rank", type=int, help="the recipe's LoRA rank; 0: full fine-tuning, all sharded"
    )
    args = parser.parse_args()
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]  # progress shows when piped
    if args.base_bytes:
        env = dict(os.environ, BENCH_BASE_BYTES_MODEL=args.model, HF_HUB_OFFLINE="1")
        launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
        subprocess.run([*launcher, "--nproc-per-node=2", __file__], env=env, check=True)
        return
    print(
        f"sl_basic {args.model}, batch {args.batch}, {args.steps} steps, {os.cpu_count()} CPUs, "
        f"LoRA rank {'(recipe default)' if args.lora_rank is None else args.lora_rank}, "
        f"load {os.getloadavg()[0]:.1f}"
    )
    baseline = None
    with tempfile.TemporaryDirectory(prefix="distributed-") as tmp:
        for nproc in map(int, args.nprocs.split(",")):
            result = run(args, nproc, Path(tmp))
            report(result, baseline)
            baseline = baseline or (result if nproc == 1 else None)
    print(f"load at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
