"""`kitchen run sl_basic` at N=1 three ways, in turn, each a fresh process (issue 34's "--nproc 1 is
not slower than before", on whatever device torch sees):

  now     today's code, no --nproc: the engine of one process
  world1  today's code as a world of one rank, started as --nproc N starts ranks
          (torch.distributed.run; NCCL on CUDA, gloo on a CPU): the sharded base, the vocabulary
          blocks and every collective, at size 1; the only way to run that path on one GPU
  before  the code from before the first --nproc commit (--before, a tree of kitchen/, cookbook/
          and train_core/: bench/gpu/prepare.sh writes .gpu/before-nproc)

    python bench/gpu/nproc.py --model M --steps 8 --batch-size 32 --rounds 2

Prints each run's median step (time/total over steps 2..n) and tokens/s, then per side the median
over rounds and its ratio to `before`, and whether each side's per-step losses equal `now`'s.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

WORLD_OF_ONE = (
    "import sys; from kitchen.adapters.local.distributed.relaunch import Launch, relaunch; "
    "sys.exit(relaunch(Launch(), sys.argv[1:], 'kitchen.app.rank_entry'))"
)


def run(side: str, args: argparse.Namespace, log_dir: Path) -> list[dict[str, float]]:
    flags = ["run", "sl_basic", "--model", args.model, "--max-steps", str(args.steps)]
    flags += ["--batch-size", str(args.batch_size), "--log-path", str(log_dir)]
    flags += ["--if-exists", "delete", "--eval-every", "0", "--num-samples-to-show", "0"]
    env = dict(os.environ, HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    if side == "before":
        env["PYTHONPATH"] = os.pathsep.join([str(args.before.resolve()), env.get("PYTHONPATH", "")])
    head = ["-c", WORLD_OF_ONE] if side == "world1" else ["-m", "kitchen.app.cli"]
    t0 = time.monotonic()
    done = subprocess.run(
        [sys.executable, *head, *flags],
        env=env,
        capture_output=True,
        text=True,
        timeout=args.timeout,
    )
    wall = time.monotonic() - t0
    if done.returncode:
        tail = " | ".join(done.stderr.strip().splitlines()[-3:])
        print(f"  {side}: exit {done.returncode} after {wall:.0f} s: {tail}", flush=True)
        return []
    path = log_dir / "metrics.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    steps = [r for r in rows if "time/total" in r]
    steady = steps[1:] or steps
    seconds = sum(r["time/total"] for r in steady)
    tokens = sum(r.get("num_tokens", 0) for r in steady)
    print(
        f"  {side}: median step {median_step(steps):.3f} s, "
        f"{tokens / seconds:.0f} tokens/s over steps 2..{len(steps)}; {wall:.0f} s wall",
        flush=True,
    )
    return steps


def median_step(steps: list[dict[str, float]]) -> float:
    """The median time/total over steps 2..n (the first pays for loading and warming up)."""
    return statistics.median(r["time/total"] for r in steps[1:] or steps)


def losses(steps: list[dict[str, float]]) -> list[float]:
    return [r[k] for r in steps for k in sorted(r) if k.startswith("train_mean_nll")]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--model", required=True)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--sides", default="before,now,world1")
    p.add_argument("--before", type=Path, default=Path(".gpu/before-nproc"))
    p.add_argument("--out", type=Path, default=Path("/tmp/kitchen-nproc"))
    p.add_argument("--timeout", type=float, default=300)
    args = p.parse_args()
    sides = args.sides.split(",")
    if "before" in sides and not (args.before / "kitchen").is_dir():
        sys.exit(f"--before {args.before}: no kitchen/ there (bench/gpu/prepare.sh writes it)")
    medians: dict[str, list[float]] = {side: [] for side in sides}
    first: dict[str, list[float]] = {}
    for round_ in range(args.rounds):
        print(f"round {round_ + 1}", flush=True)
        for side in sides:
            steps = run(side, args, args.out / f"{side}{round_}")
            if steps:
                medians[side].append(median_step(steps))
                first.setdefault(side, losses(steps))
    base = statistics.median(medians["before"]) if medians.get("before") else None
    for side in sides:
        if not medians[side]:
            continue
        step = statistics.median(medians[side])
        ratio = f", {step / base:.2f}x before" if base else ""
        same = ""
        if side != "now" and first.get("now") and first.get(side):
            a, b = first["now"], first[side]
            gap = max(
                (abs(x - y) / max(abs(y), 1e-30) for x, y in zip(a, b, strict=False)), default=0.0
            )
            same = f"; losses vs now: {'identical' if a == b else f'max rel. gap {gap:.1e}'}"
        print(f"{side}: median step {step:.3f} s over {len(medians[side])} runs{ratio}{same}")


if __name__ == "__main__":
    main()
