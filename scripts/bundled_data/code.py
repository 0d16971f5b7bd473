"""The bundled `code` set: the problems of code_problems.py in the converted DeepCoder shape
(cookbook/datasets/code.py), expected outputs computed by running each reference solution."""

from __future__ import annotations

import contextlib
import io
import json
import sys
from typing import Any

from bundled_data.code_problems import FUNCTIONS, STDIN, FunctionProblem, StdinProblem
from cookbook.datasets.code import case_row


def run_stdin(solution: str, stdin: str) -> str:
    """Stdout of trusted reference code `solution` fed `stdin` (in-process: our own code only)."""
    out = io.StringIO()
    saved = sys.stdin
    sys.stdin = io.StringIO(stdin)
    try:
        with contextlib.redirect_stdout(out):
            exec(compile(solution, "<solution>", "exec"), {"__name__": "__main__"})
    finally:
        sys.stdin = saved
    return out.getvalue()


def call_function(solution: str, name: str, args: tuple[Any, ...]) -> Any:
    namespace: dict[str, Any] = {}
    exec(compile(solution, "<solution>", "exec"), namespace)
    return namespace[name](*args)


def stdin_row(p: StdinProblem) -> dict:
    tests = []
    for raw in p.inputs:
        stdin = raw + "\n"
        tests.append(case_row(stdin, run_stdin(p.solution, stdin), "stdin_stdout", None))
    example = tests[0]
    problem = (
        f"{p.statement}\n\nExample\nInput:\n{example['input']}Output:\n{example['output']}"
    ).rstrip("\n")
    return {"id": p.id, "problem": problem, "starter_code": None, "tests": tests,
            "solution": p.solution}  # fmt: skip


def function_row(p: FunctionProblem) -> dict:
    tests = []
    for args in p.inputs:
        result = call_function(p.solution, p.func_name, args)
        args_text = "\n".join(json.dumps(a) for a in args)
        tests.append(case_row(args_text, json.dumps(result), "functional", p.func_name))
    first = p.inputs[0]
    call = f"{p.func_name}({', '.join(repr(a) for a in first)})"
    problem = f"{p.statement}\n\nExample: {call} returns {call_function(p.solution, p.func_name, first)!r}."
    return {"id": p.id, "problem": problem, "starter_code": f"def {p.signature}:\n    ",
            "tests": tests, "solution": p.solution}  # fmt: skip


def make_code() -> list[dict]:
    rows = [stdin_row(p) for p in STDIN] + [function_row(p) for p in FUNCTIONS]
    ids = [r["id"] for r in rows]
    assert len(set(ids)) == len(ids), "duplicate problem ids"
    return rows
