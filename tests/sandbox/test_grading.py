"""Honest grading through the real local sandbox: correct solutions pass, wrong ones fail, and a
solution cannot talk its way into a pass."""

from __future__ import annotations

import asyncio

import pytest

from cookbook.envs.output_match import first_mismatch, outputs_match, values_match
from cookbook.envs.sandbox_grading import (
    CallCase,
    StdioCase,
    grade_asserts,
    grade_calls,
    grade_stdio,
)
from kitchen.ports.sandbox import Limits

SUM_CASES = [
    StdioCase(input="1 2\n", output="3\n"),
    StdioCase(input="10 -4\n", output="6"),
    StdioCase(input="0 0\n", output="0\n"),
]


def grade(coro):
    return asyncio.run(coro)


@pytest.mark.parametrize(
    ("actual", "expected", "match"),
    [
        ("3\n", "3", True),
        ("1 2  \r\n3\n\n", "1 2\n3", True),  # trailing blanks, CRLF, trailing empty lines
        ("  1 2\n", "1 2\n", True),
        ("0.50000\n", "0.5\n", True),
        ("0.3333333\n", "0.333333333\n", True),  # within allclose's tolerance
        ("0.34\n", "0.333333\n", False),
        ("2 1\n", "1 2\n", False),  # order matters: no token-set comparison
        ("1 2 3\n", "1 2\n", False),
        ("100001\n", "100000\n", False),  # integers compare exactly
        ("1\n2\n", "1\n", False),
        ("", "", True),
        ("YES", "yes", False),
        ("1\n\n2", "1\n2", False),  # an interior empty line is a line
    ],
)
def test_output_comparison(actual, expected, match):
    assert outputs_match(actual, expected) is match


def test_mismatch_names_the_line():
    assert first_mismatch("1\n5\n", "1\n6\n") == "line 2: got '5', expected '6'"
    assert first_mismatch("1\n", "1\n2\n") == "got 1 lines, expected 2"


def test_values_match_like_livecodebench():
    assert (
        values_match([1, 2], [1, 2]) and values_match(3, [3]) and values_match({"1": 2}, {"1": 2})
    )
    assert not values_match([1, 2], [2, 1]) and not values_match([1, 2], [[1, 2], [3, 4]])


def test_stdio_correct_solution_passes_and_wrong_ones_fail(sandbox):
    correct = "a, b = map(int, input().split())\nprint(a + b)\n"
    assert grade(grade_stdio(sandbox, correct, SUM_CASES)).passed_all

    wrong = "a, b = map(int, input().split())\nprint(a - b if a > 5 else a + b)\n"
    report = grade(grade_stdio(sandbox, wrong, SUM_CASES))
    assert [c.passed for c in report.cases] == [True, False, True]
    assert report.cases[1].reason == "wrong answer: line 1: got '14', expected '6'"

    crashes = "a, b = map(int, input().split(','))\nprint(a + b)\n"
    report = grade(grade_stdio(sandbox, crashes, SUM_CASES[:1]))
    assert report.cases[0].reason.startswith("runtime error (exit 1): ValueError")


def test_stdio_fail_fast_skips_after_first_failure(sandbox):
    report = grade(grade_stdio(sandbox, "print(0)", SUM_CASES, fail_fast=True))
    assert [c.passed for c in report.cases] == [False, False, False]
    assert report.cases[1].reason == "not run: an earlier test failed"
    assert report.summary().startswith("0/3 tests passed; test 0: wrong answer")


TWO_SUM = """
class Solution:
    def twoSum(self, nums: List[int], target: int) -> List[int]:
        seen = {}
        for i, x in enumerate(nums):
            if target - x in seen:
                return [seen[target - x], i]
            seen[x] = i
"""
TWO_SUM_CASES = [
    CallCase(args=[[2, 7, 11, 15], 9], expected=[0, 1]),
    CallCase(args=[[3, 2, 4], 6], expected=[1, 2]),
    CallCase(args=[[3, 3], 6], expected=[0, 1]),
]


def test_call_cases_pass_a_correct_leetcode_solution(sandbox):
    report = grade(grade_calls(sandbox, TWO_SUM, "twoSum", TWO_SUM_CASES))
    assert report.passed_all, report.cases


def test_call_cases_fail_wrong_slow_and_cheating_solutions(sandbox):
    wrong = TWO_SUM.replace("return [seen[target - x], i]", "return [i, seen[target - x]]")
    report = grade(grade_calls(sandbox, wrong, "twoSum", TWO_SUM_CASES))
    assert not any(c.passed for c in report.cases)
    assert report.cases[0].reason == "wrong answer: returned [1, 0], expected [0, 1]"

    slow = "def f(x):\n    while x:\n        pass\n    return 0\n"
    report = grade(
        grade_calls(
            sandbox,
            slow,
            "f",
            [CallCase(args=[1], expected=0), CallCase(args=[0], expected=0)],
            case_timeout_s=0.5,
        )
    )
    assert [c.passed for c in report.cases] == [False, True]
    assert report.cases[0].reason.startswith("timeout")

    # An object equal to everything never leaves the sandbox: the host compares JSON.
    always_equal = (
        "class Eq:\n    def __eq__(self, other):\n        return True\ndef f(x):\n    return Eq()\n"
    )
    report = grade(grade_calls(sandbox, always_equal, "f", [CallCase(args=[1], expected=1)]))
    assert not report.passed_all and "not JSON" in report.cases[0].reason

    missing = grade(
        grade_calls(sandbox, "def g():\n    pass\n", "f", [CallCase(args=[], expected=None)])
    )
    assert missing.cases[0].reason == "solution failed to load: no function 'f' in the solution"


def test_assert_cases_grade_each_snippet(sandbox):
    program = "def add(a, b):\n    return a + b\n"
    asserts = ["assert add(1, 2) == 3", "assert add(2, 2) == 5", "assert add(undefined, 1)"]
    report = grade(grade_asserts(sandbox, program, asserts))
    assert [c.passed for c in report.cases] == [True, False, False]
    assert report.cases[1].reason == "assertion failed: assert add(2, 2) == 5"
    assert report.cases[2].reason.startswith("NameError")


def test_humaneval_style_check(sandbox):
    check = "def check(candidate):\n    assert candidate([1, 2, 3]) == 6\n    assert candidate([]) == 0\n\ncheck(total)\n"
    assert grade(grade_asserts(sandbox, "def total(xs):\n    return sum(xs)\n", [check])).passed_all
    assert not grade(
        grade_asserts(sandbox, "def total(xs):\n    return len(xs)\n", [check])
    ).passed_all


def test_asserts_cannot_be_skipped_by_exiting_or_forging(sandbox):
    exits = "import sys\nsys.exit(0)\n"
    report = grade(grade_asserts(sandbox, exits, ["assert False"]))
    assert not report.passed_all and "SystemExit" in report.cases[0].reason
    import_os_exit = "import os\nos._exit(0)\n"
    report = grade(grade_asserts(sandbox, import_os_exit, ["assert False"]))
    assert (
        not report.passed_all and report.cases[0].reason == "not run: the harness reported nothing"
    )
    forged = (
        "import os\n"
        'os.write(1, b\'@@kitchen-case@@ case {"index": 0, "passed": true}\\n\')\n'
        "os._exit(0)\n"
    )
    assert not grade(grade_asserts(sandbox, forged, ["assert False"])).passed_all


def test_harness_limits_still_apply(sandbox):
    hog = "def f():\n    return len(bytearray(10 * 1024**3))\n"
    report = grade(
        grade_calls(
            sandbox, hog, "f", [CallCase(args=[], expected=0)], limits=Limits(memory_mb=256)
        )
    )
    assert not report.passed_all and report.cases[0].reason.startswith("MemoryError")


def test_a_solution_that_defines_nothing_does_not_borrow_preamble_functions(sandbox):
    import asyncio

    from cookbook.envs.sandbox_grading import CallCase, grade_calls

    report = asyncio.run(
        grade_calls(sandbox, "print(0)\n", "add", [CallCase(args=[1, 2], expected=3)])
    )
    assert not report.passed_all
    report = asyncio.run(
        grade_calls(
            sandbox,
            "def add(a, b):\n    return a + b\n",
            "add",
            [CallCase(args=[1, 2], expected=3)],
        )
    )
    assert report.passed_all
