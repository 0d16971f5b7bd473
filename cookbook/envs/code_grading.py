"""Code tasks and their grading: the model's fenced code block, run against the task's tests in
the sandbox through cookbook.envs.sandbox_grading (stdin/stdout pairs, and function calls whose return
values the host compares).

Prompt and code extraction as tinker-cookbook 0.6.1's code_rl (LiveCodeBench's system prompt;
the last fenced block of the response is the answer).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cookbook.envs.sandbox_grading import (
    CallCase,
    CaseResult,
    GradeReport,
    StdioCase,
    grade_calls,
    grade_stdio,
)
from kitchen.engine.errors import DataError
from kitchen.ports.sandbox import Limits, SandboxPort, time_limits

LCB_SYSTEM_MESSAGE = (
    "You are an expert Python programmer. You will be given a question (problem specification) "
    "and will generate a correct Python program that matches the specification and passes all "
    "tests."
)
LCB_FORMAT_WITH_STARTER_CODE = (
    "You will use the following starter code to write the solution to the problem and enclose "
    "your code within delimiters."
)
LCB_FORMAT_WITHOUT_STARTER_CODE = (
    "Read the inputs from stdin solve the problem and write the answer to stdout (do not directly "
    "test on the sample inputs). Enclose your code within delimiters as follows. Ensure that when "
    "the python program runs, it reads the inputs, runs the algorithm and writes output to STDOUT."
)

_FENCED = re.compile(r"```(?:\w+)?\n(.*?)```", re.DOTALL)


def lcb_prompt(problem: str, starter_code: str | None = None) -> str:
    """The user message of a task: LiveCodeBench's instructions around the statement."""
    text = f"{LCB_SYSTEM_MESSAGE}\n\n{problem}"
    if not text.endswith("\n"):  # the format section starts on its own line
        text += "\n\n"
    if starter_code:
        text += f"### Format: {LCB_FORMAT_WITH_STARTER_CODE}\n```python\n{starter_code}\n```\n\n"
    else:
        text += (
            f"### Format: {LCB_FORMAT_WITHOUT_STARTER_CODE}\n```python\n# YOUR CODE HERE\n```\n\n"
        )
    return text + "### Answer: (use the provided format with backticks)\n\n"


def fenced_blocks(text: str) -> list[str]:
    """The bodies of the response's fenced code blocks, in order."""
    return list(_FENCED.findall(text))


def extract_code(text: str) -> str | None:
    """The last fenced code block of a response (stripped), or None when it has none."""
    blocks = fenced_blocks(text)
    return blocks[-1].strip() if blocks else None


@dataclass(frozen=True)
class StdioTest:
    index: int
    case: StdioCase


@dataclass(frozen=True)
class CallTest:
    index: int
    fn_name: str
    case: CallCase


@dataclass(frozen=True)
class CodeTask:
    """One problem: its statement, optional starter code, and its tests in grader form."""

    problem: str
    stdio_tests: tuple[StdioTest, ...]
    call_tests: tuple[CallTest, ...]
    starter_code: str | None = None
    id: str | None = None

    @property
    def num_tests(self) -> int:
        return len(self.stdio_tests) + len(self.call_tests)

    def prompt(self) -> str:
        return lcb_prompt(self.problem, self.starter_code)

    def first_tests(self, n: int | None) -> CodeTask:
        """The task restricted to its first `n` tests (all when n is None or 0)."""
        if not n or n >= self.num_tests:
            return self
        keep = set(range(n))
        return CodeTask(
            self.problem,
            tuple(t for t in self.stdio_tests if t.index in keep),
            tuple(t for t in self.call_tests if t.index in keep),
            self.starter_code,
            self.id,
        )


def _call_case(test: Mapping[str, Any], where: str, i: int) -> CallCase:
    try:
        args = [json.loads(line) for line in str(test["input"]).splitlines() if line.strip()]
        expected = json.loads(str(test["output"]))
    except json.JSONDecodeError as e:
        raise DataError(
            f'{where}: field "tests"[{i}] is a functional test whose input/output is not JSON '
            f"({e.msg}); expected one JSON value per line"
        ) from None
    return CallCase(args=args, expected=expected)


def code_task(row: Mapping[str, Any], where: str = "row") -> CodeTask:
    """A converted row (cookbook.datasets.code.deepcoder_row) -> CodeTask."""
    stdio, calls = [], []
    for i, test in enumerate(row["tests"]):
        if test["testtype"] == "functional":
            name = (test.get("metadata") or {}).get("func_name")
            if not name:
                raise DataError(f'{where}: field "tests"[{i}] is functional but names no func_name')
            calls.append(CallTest(i, str(name), _call_case(test, where, i)))
        else:
            stdio.append(StdioTest(i, StdioCase(input=test["input"], output=test["output"])))
    if not stdio and not calls:
        raise DataError(f'{where}: field "tests" is empty; expected at least one test')
    return CodeTask(
        row["problem"], tuple(stdio), tuple(calls), row.get("starter_code"), row.get("id")
    )


@dataclass(frozen=True)
class CodeGrader:
    """Runs a program against a task's tests in `sandbox`: one run per stdin/stdout test, one
    run per function name for call tests; `timeout_s` seconds of CPU time per test (a loaded
    machine stretches only the wall-clock backstop, kitchen.ports.sandbox.time_limits),
    `memory_mb` per process."""

    sandbox: SandboxPort
    timeout_s: float = 6.0
    memory_mb: int = 512

    async def grade(self, code: str, task: CodeTask) -> GradeReport:
        cases: list[CaseResult] = []
        if task.stdio_tests:
            limits = time_limits(self.timeout_s, Limits(memory_mb=self.memory_mb))
            report = await grade_stdio(
                self.sandbox, code, [t.case for t in task.stdio_tests], limits=limits
            )
            cases += _reindex(report.cases, [t.index for t in task.stdio_tests])
        for fn_name in dict.fromkeys(t.fn_name for t in task.call_tests):
            tests = [t for t in task.call_tests if t.fn_name == fn_name]
            report = await grade_calls(
                self.sandbox,
                code,
                fn_name,
                [t.case for t in tests],
                limits=Limits(memory_mb=self.memory_mb),
                case_timeout_s=self.timeout_s,
            )
            cases += _reindex(report.cases, [t.index for t in tests])
        return GradeReport(cases=sorted(cases, key=lambda c: c.index))


def _reindex(cases: Sequence[CaseResult], indices: Sequence[int]) -> list[CaseResult]:
    return [c.model_copy(update={"index": i}) for c, i in zip(cases, indices, strict=True)]


def tool_feedback(report: GradeReport, max_failures: int = 3) -> str:
    """What check_solution tells the model: pass/fail, a one-line summary, the first failures."""
    failures = [{"test": c.index, "reason": c.reason[:300]} for c in report.cases if not c.passed][
        :max_failures
    ]
    return json.dumps(
        {"passed": report.passed_all, "summary": report.summary(), "failures": failures},
        ensure_ascii=False,
    )
