"""Two Kitchen processes on one machine: a step of each, side by side, against a step of one alone,
under OpenMP's ways of waiting (issue 34).

    .venv/bin/python bench/two_processes.py            # SmolLM2-135M sl_basic, about 8 minutes on 2 quiet cores
    .venv/bin/python bench/two_processes.py --steps 3 --policies passive,default+passive

Each run is `kitchen run sl_basic` in a fresh process with torch on --threads threads (default: every
core, what the engine picks for SmolLM2 alone). Policies:
- auto: neither variable set, so each process takes what Kitchen chooses (kitchen/engine/cores.py):
  the default when it is alone as it loads torch, PASSIVE when another OpenMP or Kitchen process
  runs. Started together both wait passively; with a --stagger longer than the first's start-up
  (until it has loaded torch), the first keeps the default (as in default+passive).
- passive: OMP_WAIT_POLICY=PASSIVE; an idle OpenMP thread sleeps at once and gives its core back.
- default: libgomp's own default: an idle thread spins 300,000 times before it sleeps
  (OMP_WAIT_POLICY=PASSIVE with GOMP_SPINCOUNT=300000 is that setting while threads <= cores).
- active: OMP_WAIT_POLICY=ACTIVE, spinning without end.
- spin10k: PASSIVE with GOMP_SPINCOUNT=10000, a short spin.
- A+B: the pair's first process under A, its second under B (alone: A), e.g. default+passive, what
  a process that started alone meets when a second arrives (it cannot change its policy then).
The second process of a pair starts --stagger seconds after the first.
Per run it prints every step's seconds (metrics.jsonl time/total), the median of the steps after the
first, the process's CPU seconds per wall second over its life, and the policy and spin count its
OpenMP runtime reports (OMP_DISPLAY_ENV); per policy, pair / alone (the slower of the pair over the
lone run; sharing predicts 2x when each process wants every core) and passive alone / default alone
(what PASSIVE costs a process that is alone). A run still going after --timeout is stopped and
reports the steps it finished. Other work on the machine makes every number larger and the ratios
meaningless: note the load it prints, and compare only runs taken on otherwise idle cores.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

POLICIES: dict[str, dict[str, str]] = {
    "passive": {"OMP_WAIT_POLICY": "PASSIVE"},
    "default": {"OMP_WAIT_POLICY": "PASSIVE", "GOMP_SPINCOUNT": "300000"},
    "active": {"OMP_WAIT_POLICY": "ACTIVE"},
    # A short spin before sleeping: back-to-back parallel regions of a lone process still find their
    # threads awake, while a waiting thread gives its core back within microseconds.
    "spin10k": {"OMP_WAIT_POLICY": "PASSIVE", "GOMP_SPINCOUNT": "10000"},
    # Neither variable set: the process takes what Kitchen chooses (kitchen/engine/cores.py).
    "auto": {},
}


@dataclass
class Run:
    steps_s: list[float]
    cpu_per_wall: float
    waits: str  # the wait policy and spin count the process's OpenMP runtime reported

    @property
    def step_s(self) -> float:
        """Median step after the first (which also pays for warm-up); NaN when none finished."""
        steady = self.steps_s[1:] or self.steps_s
        return statistics.median(steady) if steady else float("nan")


def start(args: argparse.Namespace, policy: str, log_dir: Path) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    env |= POLICIES[policy] | {"OMP_NUM_THREADS": str(args.threads), "HF_HUB_OFFLINE": "1"}
    env["TOKENIZERS_PARALLELISM"] = "false"
    env["OMP_DISPLAY_ENV"] = "VERBOSE"  # libgomp prints the policy it took on stderr, as it loads
    flags = ["--model", args.model, "--max-steps", str(args.steps), "--batch-size", str(args.batch)]
    flags += ["--eval-every", "0", "--num-samples-to-show", "0", "--save-every", "0"]
    flags += ["--test-dataset", "None", "--no-register-model", "--log-dir", str(log_dir)]
    cmd = [sys.executable, "-m", "kitchen.app.cli", "run", "sl_basic", *flags]
    with open(
        log_dir.with_suffix(".err"), "wb"
    ) as err:  # the child keeps its own copy of the handle
        return subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=err)


def waits_of(log_dir: Path) -> str:
    err = log_dir.with_suffix(".err").read_text(errors="replace")
    policy = re.search(r"OMP_WAIT_POLICY = '(\w+)'", err)
    spins = re.search(r"GOMP_SPINCOUNT = '(\d+)'", err)
    if not (policy and spins):
        return "unreported"
    return f"{policy.group(1)} spin {int(spins.group(1)):,}"


def steps_of(log_dir: Path) -> list[float]:
    path = log_dir / "metrics.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    return [r["time/total"] for r in map(json.loads, lines) if "time/total" in r]


def run_side_by_side(args: argparse.Namespace, policies: list[str], root: Path) -> list[Run]:
    """One process per policy, the i-th started args.stagger seconds after the one before."""
    count = len(policies)
    dirs = [Path(tempfile.mkdtemp(prefix=f"{p}{count}-", dir=root)) for p in policies]
    t0 = time.monotonic()
    procs: dict[int, tuple[int, Path]] = {}
    for i, (policy, d) in enumerate(zip(policies, dirs, strict=True)):
        if i:
            time.sleep(args.stagger)
        procs[start(args, policy, d).pid] = (i, d)
    runs: dict[int, Run] = {}
    deadline = t0 + args.timeout
    while procs:
        pid, status, usage = os.wait4(-1, os.WNOHANG)
        if pid == 0:
            if time.monotonic() > deadline:
                for p in procs:
                    os.kill(p, signal.SIGKILL)
                deadline = float("inf")
            time.sleep(0.2)
            continue
        i, d = procs.pop(pid)
        if os.waitstatus_to_exitcode(status) not in (0, -signal.SIGKILL):
            tail = d.with_suffix(".err").read_text(errors="replace").strip().splitlines()[-1:]
            print(
                f"  run {i} failed with exit status {os.waitstatus_to_exitcode(status)}: {' '.join(tail)}"
            )
        cpu = usage.ru_utime + usage.ru_stime
        runs[i] = Run(steps_of(d), cpu / (time.monotonic() - t0), waits_of(d))
    return [runs[i] for i in range(count)]


def describe(label: str, runs: list[Run]) -> None:
    for i, r in enumerate(runs):
        steps = " ".join(f"{s:.2f}" for s in r.steps_s) or "none finished"
        print(
            f"  {label:<6} #{i}: step s [{steps}]  median {r.step_s:.2f}  CPU/wall {r.cpu_per_wall:.2f}  {r.waits}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--steps", type=int, default=4, help="training steps per run")
    parser.add_argument("--batch", type=int, default=8, help="conversations per step")
    parser.add_argument(
        "--threads", type=int, default=os.cpu_count() or 1, help="torch threads per process"
    )
    parser.add_argument(
        "--policies",
        default="auto,passive,default,default+passive",
        help=f"comma list of {', '.join(POLICIES)}, or A+B: the pair's first under A, its second under B",
    )
    parser.add_argument(
        "--stagger",
        type=float,
        default=0.0,
        help="seconds between the starts of a pair (so the second can see the first)",
    )
    parser.add_argument(
        "--timeout", type=float, default=120.0, help="seconds a run may take before it is stopped"
    )
    args = parser.parse_args()
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]  # progress shows when piped
    policies = args.policies.split(",")
    for p in (name for spec in policies for name in spec.split("+")):
        if p not in POLICIES:
            raise SystemExit(
                f"error: --policies: unknown policy {p!r}; expected one of {', '.join(POLICIES)}"
            )
    print(
        f"sl_basic {args.model}, batch {args.batch}, {args.steps} steps, {args.threads} threads per process, "
        f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}"
    )
    alone: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="two_processes-") as tmp:
        for policy in policies:
            print(f"{policy}:")
            first, second = (policy.split("+") * 2)[:2]
            one = run_side_by_side(args, [first], Path(tmp))
            describe("alone", one)
            two = run_side_by_side(args, [first, second], Path(tmp))
            describe("pair", two)
            alone[policy] = one[0].step_s
            worst = max(r.step_s for r in two)
            if any(math.isnan(r.step_s) for r in two):
                print("  pair / alone: a run of the pair finished no step before --timeout")
            else:
                print(
                    f"  pair / alone: {worst / alone[policy]:.2f}x (slower of the two; sharing predicts 2x)"
                )
    if "passive" in alone and "default" in alone:
        print(f"passive alone / default alone: {alone['passive'] / alone['default']:.2f}x")
    print(
        f"load at the end {os.getloadavg()[0]:.1f}; children CPU s {resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime:.0f}"
    )


if __name__ == "__main__":
    main()
