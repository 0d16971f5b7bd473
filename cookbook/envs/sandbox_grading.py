"""Grade a program against test cases through any sandbox: stdin/stdout pairs, function calls
with expected return values, and assert snippets (HumanEval's `check(candidate)`).

Every case gets a verdict with a one-line reason a person (or a model calling `check_solution`)
can act on. Outputs are compared on the host (`output_match`), so a program cannot grade itself.
"""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from cookbook.envs.output_match import first_mismatch, values_match
from cookbook.envs.sandbox_harness import CASE_PREFIX, assert_harness, call_harness
from kitchen.ports.sandbox import ExecutionResult, Limits, SandboxPort, time_limits


class StdioCase(BaseModel):
    """Feed `input` on stdin; stdout must match `output` (see output_match)."""

    model_config = ConfigDict(frozen=True)
    input: str
    output: str


class CallCase(BaseModel):
    """Call the solution's function with `args`; its JSON return value must equal `expected`."""

    model_config = ConfigDict(frozen=True)
    args: list[Any]
    expected: Any


class CaseResult(BaseModel):
    index: int
    passed: bool
    reason: str = Field(description="'passed', or why not: wrong answer at line N, timeout, ...")


class GradeReport(BaseModel):
    cases: list[CaseResult]
    run: ExecutionResult | None = Field(
        default=None, description="the sandbox run (call/assert graders run every case in one)"
    )

    @property
    def passed_all(self) -> bool:
        return bool(self.cases) and all(c.passed for c in self.cases)

    @property
    def num_passed(self) -> int:
        return sum(c.passed for c in self.cases)

    def summary(self) -> str:
        failed = [c for c in self.cases if not c.passed]
        head = f"{self.num_passed}/{len(self.cases)} tests passed"
        return head if not failed else f"{head}; test {failed[0].index}: {failed[0].reason}"


def failure_reason(result: ExecutionResult) -> str:
    """Why a run that did not exit 0 fails its case, in one line."""
    if result.reason == "runtime_error":
        lines = result.stderr.strip().splitlines()
        return (
            f"runtime error (exit {result.exit_code}): {lines[-1][:300] if lines else 'no stderr'}"
        )
    details = {
        "timeout": f"timeout after {result.wall_s:.1f}s"
        + (f" ({result.cpu_s:.1f}s of CPU time)" if result.cpu_s is not None else ""),
        "memory": "memory limit exceeded",
        "output_limit": "output limit exceeded",
        "killed": f"killed by signal {(result.exit_code or 128) - 128}",
        "sandbox_error": f"sandbox error: {result.stderr.strip()[:300]}",
    }
    return details.get(result.reason, result.reason)


def _verdict_stdio(index: int, result: ExecutionResult, expected: str) -> CaseResult:
    if not result.ok:
        return CaseResult(index=index, passed=False, reason=failure_reason(result))
    if result.stdout_truncated:
        return CaseResult(index=index, passed=False, reason="output limit exceeded")
    mismatch = first_mismatch(result.stdout, expected)
    if mismatch is not None:
        return CaseResult(index=index, passed=False, reason=f"wrong answer: {mismatch}")
    return CaseResult(index=index, passed=True, reason="passed")


async def grade_stdio(
    sandbox: SandboxPort,
    program: str,
    cases: Sequence[StdioCase],
    *,
    limits: Limits | None = None,
    fail_fast: bool = False,
) -> GradeReport:
    """One fresh sandbox run per case (concurrently, up to the sandbox's bound). `fail_fast`
    runs them in order and marks the rest 'not run' after the first failure."""
    if not fail_fast:
        results = await asyncio.gather(
            *(sandbox.run_async(program, stdin=c.input, limits=limits) for c in cases)
        )
        return GradeReport(
            cases=[
                _verdict_stdio(i, r, c.output)
                for i, (r, c) in enumerate(zip(results, cases, strict=True))
            ]
        )
    verdicts: list[CaseResult] = []
    for i, case in enumerate(cases):
        if verdicts and not verdicts[-1].passed:
            verdicts.append(
                CaseResult(index=i, passed=False, reason="not run: an earlier test failed")
            )
            continue
        result = await sandbox.run_async(program, stdin=case.input, limits=limits)
        verdicts.append(_verdict_stdio(i, result, case.output))
    return GradeReport(cases=verdicts)


def _harness_limits(limits: Limits | None, n_cases: int, case_timeout_s: float) -> Limits:
    """One run for all cases: as tinker-cookbook, (case timeout + 1) per case + 5 s overall, of
    CPU time, with its wall-clock backstop (kitchen.ports.sandbox.time_limits)."""
    return time_limits((case_timeout_s + 1) * max(n_cases, 1) + 5, limits)


def _reports(stdout: str, nonce: str | None = None) -> tuple[dict[int, dict[str, Any]], str | None]:
    """Parse the harness's report lines: per-case fields, and a load error if any. The last line
    for a case wins; with a nonce, lines without it are ignored."""
    per_case: dict[int, dict[str, Any]] = {}
    load_error: str | None = None
    for line in stdout.splitlines():
        if not line.startswith(CASE_PREFIX):
            continue
        tag, _, payload = line[len(CASE_PREFIX) :].partition(" ")
        try:
            fields = json.loads(payload)
        except ValueError:
            continue
        if not isinstance(fields, dict) or (nonce is not None and fields.get("nonce") != nonce):
            continue
        if tag == "load":
            load_error = str(fields.get("error", "could not load the solution"))
        elif tag == "case" and isinstance(fields.get("index"), int):
            per_case[fields["index"]] = fields
    return per_case, load_error


def _missing(index: int, result: ExecutionResult, load_error: str | None) -> CaseResult:
    if load_error is not None:
        return CaseResult(
            index=index, passed=False, reason=f"solution failed to load: {load_error}"
        )
    why = failure_reason(result) if not result.ok else "the harness reported nothing"
    return CaseResult(index=index, passed=False, reason=f"not run: {why}")


async def grade_calls(
    sandbox: SandboxPort,
    program: str,
    fn_name: str,
    cases: Sequence[CallCase],
    *,
    limits: Limits | None = None,
    case_timeout_s: float = 6.0,
) -> GradeReport:
    """Call `fn_name` once per case inside one sandbox run; compare return values on the host."""
    spec = {"fn_name": fn_name, "args": [c.args for c in cases]}
    result = await sandbox.run_async(
        call_harness(case_timeout_s),
        files={"solution.py": program, "cases.json": json.dumps(spec)},
        limits=_harness_limits(limits, len(cases), case_timeout_s),
    )
    per_case, load_error = _reports(result.stdout)
    verdicts = []
    for i, case in enumerate(cases):
        fields = per_case.get(i)
        if fields is None:
            verdicts.append(_missing(i, result, load_error))
        elif "error" in fields:
            verdicts.append(CaseResult(index=i, passed=False, reason=str(fields["error"])))
        elif values_match(fields.get("value"), case.expected):
            verdicts.append(CaseResult(index=i, passed=True, reason="passed"))
        else:
            got, want = json.dumps(fields.get("value"))[:120], json.dumps(case.expected)[:120]
            verdicts.append(
                CaseResult(
                    index=i, passed=False, reason=f"wrong answer: returned {got}, expected {want}"
                )
            )
    return GradeReport(cases=verdicts, run=result)


async def grade_asserts(
    sandbox: SandboxPort,
    program: str,
    asserts: Sequence[str],
    *,
    limits: Limits | None = None,
    case_timeout_s: float = 6.0,
) -> GradeReport:
    """Execute each assert snippet in the solution's namespace inside one sandbox run. For
    HumanEval pass one snippet: the test code followed by `check(<entry_point>)`."""
    nonce = secrets.token_hex(16)
    result = await sandbox.run_async(
        assert_harness(case_timeout_s),
        files={"solution.py": program, "asserts.json": json.dumps(list(asserts)), ".nonce": nonce},
        limits=_harness_limits(limits, len(asserts), case_timeout_s),
    )
    per_case, load_error = _reports(result.stdout, nonce)
    verdicts = []
    for i in range(len(asserts)):
        fields = per_case.get(i)
        if fields is None:
            verdicts.append(_missing(i, result, load_error))
        elif fields.get("passed") is True:
            verdicts.append(CaseResult(index=i, passed=True, reason="passed"))
        else:
            verdicts.append(
                CaseResult(index=i, passed=False, reason=str(fields.get("error", "failed")))
            )
    return GradeReport(cases=verdicts, run=result)
