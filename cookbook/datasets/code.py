"""Code problems with tests: `agentica-org/DeepCoder-Preview-Dataset` rows and the bundled `code`.

Upstream rows have `problem` (or `question`), `tests` (a JSON string), optional `starter_code` and
`metadata`. Its configs store tests three ways, all read here:
- lcbv5 / codeforces: [{"input", "output", "testtype": "stdin" | "functional", "metadata":
  {"func_name"}}] with functional inputs as newline-separated JSON arguments;
- primeintellect: [{"type": "stdin_stdout" | "function_call", "input", "output", "fn_name"}];
- taco: {"inputs": [...], "outputs": [...], "fn_name"?}.

Converted row (tinker-cookbook's normalised DeepcoderTask fields):

    {"problem": str,                # the statement only; the env adds its own instructions
     "starter_code": str | None,    # e.g. "def add(a, b):\\n    " for function problems
     "tests": [{"input": str, "output": str,
                "testtype": "stdin_stdout" | "functional",
                "metadata": {"func_name": str | None}}]}

A stdin_stdout test feeds `input` on stdin and expects `output` on stdout (compare stripped
lines). A functional test calls `func_name` with the arguments in `input`, one JSON value per
line, and expects the JSON value in `output`. Where TACO-style data wraps each expected return
value in a one-element list, it is unwrapped (as tinker-cookbook does). The bundled rows also
carry "id" and "solution", a reference program for grader tests; never show it to the model.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from cookbook.datasets.fields import bad_field, field_path, missing_field, require
from kitchen.engine.errors import DataError

TESTTYPES = {
    "stdin": "stdin_stdout",
    "stdin_stdout": "stdin_stdout",
    "functional": "functional",
    "function_call": "functional",
}


def deepcoder_row(row: Mapping[str, Any], where: str = "row") -> dict[str, Any] | None:
    """A DeepCoder (or already converted) row -> {"problem", "tests", "starter_code"}; None when
    the row has no tests (tinker-cookbook drops those too)."""
    problem = next(
        (row[k] for k in ("problem", "question", "prompt") if isinstance(row.get(k), str)), None
    )
    if problem is None or not problem.strip():
        raise missing_field(where, field_path("problem"), "the problem statement as a string")
    key = "tests" if row.get("tests") is not None else "ground_truth"
    metadata = _as_dict(row.get("metadata"))
    tests = normalize_tests(require(row, key, where, "the tests"), metadata, where, key)
    if not tests:
        return None
    starter = row.get("starter_code")
    out: dict[str, Any] = {
        "problem": problem,
        "tests": tests,
        "starter_code": starter if isinstance(starter, str) and starter.strip() else None,
    }
    for extra in ("id", "solution"):  # the bundled set's name and reference program
        if isinstance(row.get(extra), str):
            out[extra] = row[extra]
    return out


def normalize_tests(
    raw: Any, metadata: Mapping[str, Any], where: str, key: str = "tests"
) -> list[dict[str, Any]]:
    """Tests in any of DeepCoder's layouts -> the normalised list (see module doc)."""
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError as e:
            raise DataError(
                f"{where}: field {field_path(key)} is not valid JSON ({e.msg} at column {e.colno})"
            ) from None
    if isinstance(raw, Mapping) and "inputs" in raw:
        return _from_taco(raw, metadata, where, key)
    if isinstance(raw, Mapping):
        raw = [raw]
    if not isinstance(raw, list):
        raise bad_field(where, field_path(key), raw, "a list of tests or a JSON string of one")
    return [_one_test(test, metadata, where, key, i) for i, test in enumerate(raw)]


def _one_test(
    test: Any, metadata: Mapping[str, Any], where: str, key: str, i: int
) -> dict[str, Any]:
    if not isinstance(test, Mapping):
        raise bad_field(where, field_path(key, i), test, 'an object {"input", "output", ...}')
    declared = test.get("testtype", test.get("type", "stdin_stdout"))
    testtype = TESTTYPES.get(declared)
    if testtype is None:
        field = "testtype" if "testtype" in test else "type"
        raise bad_field(
            where, field_path(key, i, field), declared, "one of " + ", ".join(TESTTYPES)
        )
    for part in ("input", "output"):
        if part not in test:
            raise missing_field(where, field_path(key, i, part), "a string")
    test_meta = _as_dict(test.get("metadata"))
    # lcbv5 stores functional values as JSON text already; primeintellect as values, TACO-wrapped.
    wrapped = "type" in test and "testtype" not in test
    if testtype == "stdin_stdout":
        return case_row(_as_text(test["input"]), _as_text(test["output"]), testtype, None)
    name = test_meta.get("func_name") or test.get("fn_name") or metadata.get("func_name")
    if not name:
        raise missing_field(
            where, field_path(key, i, "metadata") + ".func_name", "the function name"
        )
    return case_row(
        _args_text(test["input"]), _value_text(test["output"], wrapped), testtype, str(name)
    )


def _from_taco(
    raw: Mapping[str, Any], metadata: Mapping[str, Any], where: str, key: str
) -> list[dict[str, Any]]:
    inputs, outputs = raw.get("inputs") or [], raw.get("outputs") or []
    if not isinstance(inputs, list) or not isinstance(outputs, list) or len(inputs) != len(outputs):
        raise bad_field(where, field_path(key, "inputs"), inputs, "a list as long as outputs")
    name = raw.get("fn_name") or None
    if name is None:
        return [
            case_row(_as_text(i), _as_text(o), "stdin_stdout", None)
            for i, o in zip(inputs, outputs, strict=True)
        ]
    return [
        case_row(_args_text(i), _value_text(o, wrapped=True), "functional", str(name))
        for i, o in zip(inputs, outputs, strict=True)
    ]


def case_row(
    input_text: str, output_text: str, testtype: str, func_name: str | None
) -> dict[str, Any]:
    """One test case in the converted DeepCoder row shape (also what scripts/ writes bundled:code in)."""
    return {
        "input": input_text,
        "output": output_text,
        "testtype": testtype,
        "metadata": {"func_name": func_name},
    }


def _as_text(value: Any) -> str:
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return "\n".join(value)  # some TACO stdin data lists the lines
    return value if isinstance(value, str) else json.dumps(value)


def _args_text(value: Any) -> str:
    """Function arguments as one JSON value per line (LiveCodeBench's call format)."""
    if isinstance(value, str):
        return value
    args = value if isinstance(value, list) else [value]
    return "\n".join(json.dumps(arg) for arg in args)


def _value_text(value: Any, wrapped: bool) -> str:
    if isinstance(value, str) and not wrapped:
        return value
    if wrapped and isinstance(value, list) and value:
        value = value[0]
    return json.dumps(value)


def _as_dict(value: Any) -> Mapping[str, Any]:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            return {}
    return value if isinstance(value, Mapping) else {}
