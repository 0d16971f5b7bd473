"""Grading measures the program, not the machine: with busy sibling processes loading the cores it
runs on, honest solutions still pass, because a time limit is the program's CPU time (the wall
clock is only a distant backstop, kitchen.ports.sandbox.time_limits)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from importlib import resources

import pytest

from cookbook.envs.code import load_code_tasks
from cookbook.envs.code_grading import CodeGrader
from cookbook.envs.humaneval import humaneval_program, load_humaneval, passes_humaneval
from cookbook.envs.sandbox_grading import CallCase, StdioCase, grade_calls, grade_stdio
from kitchen.adapters.datasets.store import HFDatasetStore
from kitchen.ports.sandbox import time_limits

# alone (`make pytest`'s serial pass): these make the load they time against, and another worker's
# load would be counted in it
pytestmark = pytest.mark.serial

# Programs that compute for WORK_S seconds of their own CPU time, on any machine: the work is sized
# by the CPU clock, not by a loop count that a faster machine finishes sooner.
WORK_S = 0.5
HONEST = (
    "import time\n"
    "n = int(input())\n"
    f"while time.process_time() < {WORK_S}:\n"
    "    pass\n"
    "print(n + 1)\n"
)
HONEST_CALL = (
    "import time\n"
    "def f(n):\n"
    "    start = time.process_time()\n"
    f"    while time.process_time() - start < {WORK_S}:\n"
    "        pass\n"
    "    return n\n"
)
LIMIT_S = 1.0
LIMIT = time_limits(LIMIT_S)  # 1 s of CPU; the wall-clock backstop is 9 s
SPINNERS = 3


@contextmanager
def pinned_to(core: int) -> Iterator[None]:
    """Every thread of this process on `core` (the sandbox's pool threads too), so every program
    it starts, the sandboxed ones included, inherits that one core; the process's own affinity
    afterwards."""
    own = os.sched_getaffinity(0)

    def pin_all(cores: set[int]) -> None:
        for tid in os.listdir("/proc/self/task"):
            with suppress(ProcessLookupError):  # a thread that ended meanwhile
                os.sched_setaffinity(int(tid), cores)

    pin_all({core})
    try:
        yield
    finally:
        pin_all(own)


@contextmanager
def spinning(n: int) -> Iterator[list[subprocess.Popen[bytes]]]:
    """`n` processes spinning, each in its own session, as other work on the machine is: the
    sandbox starts every run in a new session, and with the kernel's autogroup scheduling
    sessions, not processes, share a core (spinners in this test's own session would take one
    session's share between them)."""
    spinners = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True)
        for _ in range(n)
    ]
    try:
        time.sleep(0.3)  # until their interpreters spin
        yield spinners
    finally:
        for proc in spinners:
            proc.kill()
        for proc in spinners:
            proc.wait()


@pytest.fixture
def busy_core() -> Iterator[int]:
    """This process and SPINNERS spinning processes on one core, for the test's duration. A
    program the sandbox runs then gets at most a fair share of that core, 1 / (SPINNERS + 1), so
    WORK_S of CPU takes (SPINNERS + 1) * WORK_S of wall clock or more: past LIMIT_S by
    construction, on a machine of any speed and any number of cores (other work on that core only
    stretches it further)."""
    core = max(os.sched_getaffinity(0))
    with pinned_to(core), spinning(SPINNERS) as spinners:
        assert all(os.sched_getaffinity(p.pid) == {core} for p in spinners)
        yield core


@pytest.fixture
def busy_cores() -> Iterator[int]:
    """SPINNERS spinning processes per core this process may run on, for the test's duration."""
    cores = len(os.sched_getaffinity(0))
    with spinning(SPINNERS * cores):
        yield cores


def test_an_honest_program_passes_its_cpu_limit_while_load_stretches_the_wall_clock(
    sandbox, busy_core
):
    report = asyncio.run(
        grade_stdio(sandbox, HONEST, [StdioCase(input="1\n", output="2\n")], limits=LIMIT)
    )
    assert report.passed_all, report.summary()
    result = sandbox.run(HONEST, stdin="1\n", limits=LIMIT)
    assert result.ok and result.cpu_s is not None and result.cpu_s < LIMIT_S
    assert result.wall_s > LIMIT_S  # the premise: load made the wall clock run past the CPU limit


def test_a_call_case_is_timed_by_cpu_under_load(sandbox, busy_core):
    cases = [CallCase(args=[7], expected=7)]
    report = asyncio.run(grade_calls(sandbox, HONEST_CALL, "f", cases, case_timeout_s=LIMIT_S))
    assert report.passed_all, report.summary()
    assert report.run is not None and report.run.wall_s > LIMIT_S  # the premise, as above


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
