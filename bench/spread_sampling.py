"""Sampling at `--nproc 2`: rank 0 decoding every request (the default) against every rank decoding
a share of them (`--spread-sampling`), and one process (issue 34).

    .venv/bin/python bench/spread_sampling.py                 # SmolLM2-135M, 4 RL steps a side
    .venv/bin/python bench/spread_sampling.py --groups 8 --group-size 8 --max-tokens 64

Each side is `kitchen run rl_basic` in a fresh launch, one after the other (never side by side: two
sets of ranks on the same cores fight over them), same seed, model, prompts and sampling params:
    nproc1   one process
    nproc2   two ranks; rank 0 decodes every row, rank 1 runs a forward beside each of its forwards
    spread   two ranks, --spread-sampling: each decodes a share of the rows (dealt by prompt)
Printed per side: the median `time/sampling` of the steps after the first (an RL step's rollouts:
every group's requests, decoded together), tokens sampled a step, torch threads per rank (the
launcher splits the cores: cores // N), and how many sampled responses equal one process's: a
row's logits come from a forward beside other rows at N = 2 spread, so they can differ in their
last bits, and the tokens after a step that trained on them with it. Linux or macOS; the load
average is printed: other work changes the times.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kitchen.app.report.rundata import load_run  # noqa: E402

SIDES = {"nproc1": ["--nproc", "1"], "nproc2": ["--nproc", "2"]}
SIDES["spread"] = [*SIDES["nproc2"], "--spread-sampling"]


@dataclass
class Side:
    sampling_s: float  # median time/sampling of the steps after the first
    tokens: int  # sampled tokens in the last step
    responses: list[list[int]]  # every sampled response, in order


def run(side: str, args: argparse.Namespace, root: Path) -> Side:
    log_dir = root / side
    command = [sys.executable, "-m", "kitchen.app.cli", "run", "rl_basic", "-m", args.model,
               "--log-dir", str(log_dir), "--no-progress", "--no-register",
               f"group_size={args.group_size}", f"groups_per_batch={args.groups}",
               f"max_tokens={args.max_tokens}", f"num_batches={args.steps}",
               "num_test_problems=0", "eval_every=0", "save_every=0",
               "remove_constant_reward_groups=false", *SIDES[side]]  # fmt: skip
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{side}: exit {done.returncode}\n{done.stderr[-3000:]}")
    ran = load_run(log_dir)
    rows = [r for r in ran.metrics.records if "time/sampling" in r]
    responses = [
        turn["tokens"]
        for step in sorted(ran.rollouts)
        for group in ran.rollouts[step]
        for trajectory in group["trajectories"]
        for turn in trajectory["turns"]
    ]
    return Side(
        statistics.median(r["time/sampling"] for r in rows[1:]),
        int(rows[-1].get("env/all/total_ac_tokens", 0)),
        responses,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--groups", type=int, default=4)
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--sides", default="nproc1,nproc2,spread")
    args = parser.parse_args()
    cores = os.cpu_count() or 1
    print(f"{args.model}: {args.groups} groups x {args.group_size} samples, <= {args.max_tokens} "
          f"tokens, {args.steps} steps; {cores} cores, load {os.getloadavg()[0]:.1f}")  # fmt: skip
    results: dict[str, Side] = {}
    with tempfile.TemporaryDirectory(prefix="kitchen-spread-") as tmp:
        for side in args.sides.split(","):
            got = results[side] = run(side, args, Path(tmp))
            first, base = next(iter(results.items()))
            threads = os.environ.get("OMP_NUM_THREADS") or max(1, cores // int(SIDES[side][1]))
            one = results.get("nproc1", got).responses
            same = sum(a == b for a, b in zip(one, got.responses, strict=False))
            print(f"{side:>7}: sampling {got.sampling_s:.2f} s/step "
                  f"({got.sampling_s / base.sampling_s:.2f}x {first}), {got.tokens} tokens/step, "
                  f"{threads} threads per rank, {same} of {len(one)} responses as nproc1")  # fmt: skip


if __name__ == "__main__":
    main()
