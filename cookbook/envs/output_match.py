"""Is a program's output the expected one? The comparison competitive-programming graders use.

Following LiveCodeBench / DeepCoder's stdin-stdout grader: strip the whole output, split into
lines, strip each line (trailing spaces, CR of CRLF, leading blanks), and compare line by line.
A line that differs as text still matches when both split into the same number of whitespace
tokens and every pair agrees: equal text, or integers with equal value, or numbers within
numpy.allclose's default tolerance (|a - b| <= 1e-8 + 1e-5 * |b|) when either is not an integer.
Order always matters: unlike tinker-cookbook's lcb_utils fallback, tokens are never compared as
sets, which would pass "2 1" for "1 2".

Function-call results are compared as JSON values, with LiveCodeBench's one leniency for data
converted from TACO: an expected list [x] also accepts x.
"""

from __future__ import annotations

import math
from typing import Any

_RTOL, _ATOL = 1e-5, 1e-8


def output_lines(text: str) -> list[str]:
    return [line.strip() for line in text.strip().split("\n")]


def _as_int(token: str) -> int | None:
    try:
        return int(token)
    except ValueError:
        return None


def _as_float(token: str) -> float | None:
    try:
        value = float(token)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def tokens_match(actual: str, expected: str) -> bool:
    if actual == expected:
        return True
    a_int, e_int = _as_int(actual), _as_int(expected)
    if a_int is not None and e_int is not None:
        return a_int == e_int
    a, e = _as_float(actual), _as_float(expected)
    return a is not None and e is not None and abs(a - e) <= _ATOL + _RTOL * abs(e)


def lines_match(actual: str, expected: str) -> bool:
    if actual == expected:
        return True
    a_tokens, e_tokens = actual.split(), expected.split()
    return len(a_tokens) == len(e_tokens) and all(map(tokens_match, a_tokens, e_tokens))


def first_mismatch(actual: str, expected: str) -> str | None:
    """None when the outputs match; else a one-line description of the first difference."""
    got, want = output_lines(actual), output_lines(expected)
    for i, (g, w) in enumerate(zip(got, want, strict=False)):
        if not lines_match(g, w):
            return f"line {i + 1}: got {_short(g)}, expected {_short(w)}"
    if len(got) != len(want):
        return f"got {len(got)} lines, expected {len(want)}"
    return None


def outputs_match(actual: str, expected: str) -> bool:
    return first_mismatch(actual, expected) is None


def values_match(actual: Any, expected: Any) -> bool:
    """JSON values from a function call: equal, or expected == [actual] (TACO's wrapping)."""
    if actual == expected:
        return True
    return isinstance(expected, list) and len(expected) == 1 and actual == expected[0]


def _short(text: str, limit: int = 80) -> str:
    return repr(text if len(text) <= limit else text[: limit - 3] + "...")
