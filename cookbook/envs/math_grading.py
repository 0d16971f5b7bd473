"""Grading answers written inside \\boxed{}: extract the last box, normalise, compare.

Two graders, by name in `GRADERS`:
- `numeric`, written for GSM8K-style numeric answers (the reference is a number): "\\$1,234.50",
  "18 eggs", "\\frac{3}{4}", "x = 5" and "18.0" all grade as the numbers they mean. Non-numeric
  references fall back to comparing normalised strings. Pure Python, no sympy, so it never hangs
  on a bad answer.
- `math_verify`, for competition math (MATH, DeepMath, Polaris): both answers parsed from LaTeX
  into sympy by the math-verify package and compared symbolically (`\\sqrt{8}` = `2\\sqrt{2}`,
  intervals, tuples), as tinker-cookbook's `grade_answer_math_verify`.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from fractions import Fraction
from typing import Literal

from kitchen.engine.errors import ConfigError

_BOX_COMMANDS = ("\\boxed", "\\fbox")
_BOXED_BARE = re.compile(r"\\boxed\s+([^\s$]+)")
_TEXT_WRAPPER = re.compile(r"^\\(?:text|textbf|mathrm|mbox)\{(.*)\}$")
_FRAC = re.compile(r"^(-?)\\[dt]?frac\{([^{}]+)\}\{([^{}]+)\}$")
_LEADING_NUMBER = re.compile(r"^(-?[\d.]+(?:/[\d.]+)?)(?:\s*[a-zA-Z][a-zA-Z.]*)*$")
_THOUSANDS = re.compile(r"(\d),(\d{3})(?!\d)")


def _box_contents(text: str, start: int) -> str | None:
    """The text inside the braces opening at text[start] ('{'), or None if they never close."""
    depth = 0
    for i in range(start, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return text[start + 1 : i]
    return None


def extract_boxed(text: str) -> str:
    """Contents of the last \\boxed{...} (or \\fbox{...}, or `\\boxed 5`); nested braces kept.
    Raises ValueError when there is none."""
    best: tuple[int, str] | None = None
    for command in _BOX_COMMANDS:
        pos = text.find(command)
        while pos != -1:
            brace = pos + len(command)
            while brace < len(text) and text[brace] == " ":
                brace += 1
            if brace < len(text) and text[brace] == "{":
                inner = _box_contents(text, brace)
                if inner is not None and (best is None or pos > best[0]):
                    best = (pos, inner)
            pos = text.find(command, pos + 1)
    if best is not None:
        return best[1]
    bare = _BOXED_BARE.findall(text)
    if bare:
        return str(bare[-1])
    raise ValueError("no \\boxed{...} answer found")


def normalize_answer(answer: str) -> str:
    """Strip what does not change the value: math delimiters, \\text{} wrappers, currency and
    percent signs, thousands separators, `x =` prefixes, spacing, a trailing period."""
    s = answer.strip().strip("$").strip()
    for old, new in (("\\!", ""), ("\\,", ""), ("\\left", ""), ("\\right", ""), ("\\$", "")):
        s = s.replace(old, new)
    s = s.replace("\\%", "").replace("%", "").replace("$", "")
    s = s.replace("^{\\circ}", "").replace("^\\circ", "")
    while True:
        m = _TEXT_WRAPPER.match(s)
        if m is None:
            break
        s = m.group(1).strip()
    if s.count("=") == 1 and len(s.split("=")[0].strip()) <= 2:
        s = s.split("=")[1]
    s = _THOUSANDS.sub(r"\1\2", s)
    s = _THOUSANDS.sub(r"\1\2", s)  # overlapping groups: 1,234,567
    s = s.strip().rstrip(".").strip()
    s = re.sub(r"\\text\{\s*([^{}]*)\}", r" \1", s).strip()
    return " ".join(s.split()).lower()


def parse_number(answer: str) -> Fraction | None:
    """The exact value of a normalised numeric answer ("12", "-3.5", "3/4", "\\frac{3}{4}",
    "18 eggs"), or None when it is not a single number."""
    s = answer.strip()
    frac = _FRAC.match(s.replace(" ", ""))
    if frac is not None:
        sign, num, den = frac.groups()
        s = f"{sign}{num}/{den}"
    m = _LEADING_NUMBER.match(s)
    if m is None:
        return None
    try:
        value = Fraction(m.group(1))
    except (ValueError, ZeroDivisionError):
        return None
    return value


def grade_answer(given: str, reference: str) -> bool:
    """True when `given` means `reference`: equal numbers, or equal normalised strings."""
    given_norm, ref_norm = normalize_answer(given), normalize_answer(reference)
    if not given_norm:
        return False
    ref_value = parse_number(ref_norm)
    if ref_value is not None:
        given_value = parse_number(given_norm)
        return given_value is not None and given_value == ref_value
    return given_norm.replace(" ", "") == ref_norm.replace(" ", "")


def _in_dollars(answer: str) -> str:
    """math-verify reads LaTeX between $...$; a bare answer is wrapped (as the cookbook does)."""
    return answer if answer.startswith("$") or answer.endswith("$") else f"${answer}$"


def grade_answer_math_verify(given: str, reference: str, timeout_seconds: int = 5) -> bool:
    """True when math-verify finds `given` equal to `reference`. Its timeouts use SIGALRM, which
    only the main thread may set: elsewhere (a rollout thread) parsing and verifying run untimed
    rather than fail every answer. The arguments go to `verify` in the cookbook's order (the
    answer first), so both grade the same answers alike."""
    try:
        from math_verify import parse, verify
    except ImportError as e:
        raise ConfigError(
            "grader math_verify needs the math-verify package: pip install math-verify"
        ) from e

    timeout = timeout_seconds if threading.current_thread() is threading.main_thread() else None
    given_expr = parse(_in_dollars(given), parsing_timeout=timeout)  # type: ignore[arg-type]
    reference_expr = parse(_in_dollars(reference), parsing_timeout=timeout)  # type: ignore[arg-type]
    return bool(verify(given_expr, reference_expr, timeout_seconds=timeout))


GraderName = Literal["numeric", "math_verify"]

GRADERS: dict[str, Callable[[str, str], bool]] = {
    "numeric": grade_answer,
    "math_verify": grade_answer_math_verify,
}
