"""Competition math rows (Hendrycks MATH, MATH-500, DeepMath-103K, Polaris-53K) -> the word-problem
shape the math env reads, {"question", "answer", "solution"}, the answer in LaTeX.

Upstream shapes, as tinker-cookbook 0.6.1's math_rl reads them:
- EleutherAI/hendrycks_math and HuggingFaceH4/MATH-500: {"problem", "solution", ...}; the answer is
  the last \\boxed{} of the solution (MATH-500's own "answer" field is not what the cookbook grades
  against). A solution without a box is dropped, as the cookbook drops it.
- zwhe99/DeepMath-103K: {"question", "final_answer", ...}.
- POLARIS-Project/Polaris-Dataset-53K: {"problem", "answer", ...}.
A DeepMath or Polaris row with an empty problem or answer is dropped (the cookbook's `None`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cookbook.datasets.fields import require_str

# EleutherAI/hendrycks_math's configs, one per subject; the cookbook trains on all of them.
HENDRYCKS_CONFIGS = (
    "algebra",
    "counting_and_probability",
    "geometry",
    "intermediate_algebra",
    "number_theory",
    "prealgebra",
    "precalculus",
)


def hendrycks_math_row(row: Mapping[str, Any], where: str = "row") -> dict[str, Any] | None:
    """{"problem", "solution"} -> the problem, the solution's last boxed answer, the solution."""
    # imported here: cookbook.envs imports the dataset catalog, which imports this module
    from cookbook.envs.math_grading import extract_boxed

    problem = require_str(row, "problem", where)
    solution = require_str(row, "solution", where)
    try:
        answer = extract_boxed(solution)
    except ValueError:
        return None
    return {"question": problem, "answer": answer, "solution": solution}


def _problem_answer(
    row: Mapping[str, Any], problem_key: str, answer_key: str
) -> dict[str, Any] | None:
    problem, answer = row.get(problem_key), row.get(answer_key)
    if not (isinstance(problem, str) and problem and answer not in (None, "")):
        return None
    return {"question": problem, "answer": str(answer), "solution": ""}


def deepmath_row(row: Mapping[str, Any], where: str = "row") -> dict[str, Any] | None:
    """{"question", "final_answer"} -> {"question", "answer"}."""
    return _problem_answer(row, "question", "final_answer")


def polaris_row(row: Mapping[str, Any], where: str = "row") -> dict[str, Any] | None:
    """{"problem", "answer"} -> {"question", "answer"}."""
    return _problem_answer(row, "problem", "answer")
