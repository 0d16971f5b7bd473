"""Grading measures the program, not the machine: with busy sibling processes loading every core,
honest solutions still pass, because a time limit is the program's CPU time (the wall clock is only
a distant backstop, kitchen.ports.sandbox.time_limits)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from importlib import resources

import pytest

from cookbook.envs.code import load_code_tasks
from cookbook.envs.code_grading import CodeGrader
from cookbook.envs.humaneval import humaneval_program, load_humaneval, passes_humaneval
from cookbook.envs.sandbox_grading import CallCase, StdioCase, grade_calls, grade_stdio
from kitchen.adapters.datasets.store import HFDatasetStore
from kitchen.ports.sandbox import time_limits


def mod7_sum(n: int) -> int:
    """sum(i % 7 for i in range(n)), without the loop."""
    return n // 7 * 21 + sum(range(n % 7))


# About 0.5 s of CPU in the sandbox's Python; under the load below it takes 1.4 to 2.2 s of wall
# clock (measured), so a 1 s wall-clock limit fails it while a 1 s CPU limit does not.
HONEST = "n = int(input())\ns = 0\nfor i in range(4_000_000):\n    s += i % 7\nprint(s + n)\n"
HONEST_OUT = f"{mod7_sum(4_000_000) + 1}\n"
LIMIT = time_limits(1.0)  # 1 s of CPU; the wall-clock backstop is 9 s


@pytest.fixture
def busy_cores() -> Iterator[int]:
    """Three spinning processes per core this process may run on, for the test's duration. Each in
    its own session, as other work on the machine is: the sandbox starts every run in a new
    session, and with the kernel's autogroup scheduling sessions, not processes, share the cores
    (spinners in this test's own session would take one session's share between them)."""
    cores = len(os.sched_getaffinity(0))
    spinners = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True)
        for _ in range(3 * cores)
    ]
    time.sleep(0.3)  # until their interpreters spin
    try:
        yield cores
    finally:
        for proc in spinners:
            proc.kill()
        for proc in spinners:
            proc.wait()


def test_an_honest_program_passes_its_cpu_limit_while_load_stretches_the_wall_clock(
    sandbox, busy_cores
):
    report = asyncio.run(
        grade_stdio(sandbox, HONEST, [StdioCase(input="1\n", output=HONEST_OUT)], limits=LIMIT)
    )
    assert report.passed_all, report.summary()
    result = sandbox.run(HONEST, stdin="1\n", limits=LIMIT)
    assert result.ok and result.cpu_s is not None and result.cpu_s < 1.0
    assert result.wall_s > 1.0  # the premise: load made the wall clock run past the CPU limit


def test_a_call_case_is_timed_by_cpu_under_load(sandbox, busy_cores):
    program = "def f(n):\n    s = 0\n    for i in range(n):\n        s += i % 7\n    return s\n"
    n = 8_000_000  # about 0.5 s of CPU
    cases = [CallCase(args=[n], expected=mod7_sum(n))]
    report = asyncio.run(grade_calls(sandbox, program, "f", cases, case_timeout_s=1.0))
    assert report.passed_all, report.summary()
    assert report.run is not None and report.run.wall_s > 1.0  # the premise, as above


def test_the_bundled_reference_solutions_pass_under_load(sandbox, busy_cores):
    tasks = load_code_tasks(HFDatasetStore(), ["bundled:code"], "train")
    with (resources.files("cookbook.data") / "code.jsonl").open() as f:
        solutions = {row["id"]: row["solution"] for row in map(json.loads, f)}
    grader = CodeGrader(sandbox)
    problems = load_humaneval(8)

    async def grade_all() -> tuple[list, list]:
        code = [grader.grade(solutions[t.id], t) for t in tasks]
        canonical = [
            passes_humaneval(sandbox, p, humaneval_program(p, p.prompt + p.canonical_solution))
            for p in problems
        ]
        return await asyncio.gather(*code), await asyncio.gather(*canonical)

    code, canonical = asyncio.run(grade_all())
    assert all(r.passed_all for r in code), [r.summary() for r in code if not r.passed_all]
    assert canonical == [True] * len(problems)


def test_a_case_that_waits_instead_of_computing_meets_the_wall_backstop(sandbox):
    program = "import time\ndef f():\n    time.sleep(60)\n    return 0\n"
    report = asyncio.run(
        grade_calls(sandbox, program, "f", [CallCase(args=[], expected=0)], case_timeout_s=0.2)
    )
    assert report.cases[0].reason.startswith("timeout: case ran 5.8s of wall-clock time")
