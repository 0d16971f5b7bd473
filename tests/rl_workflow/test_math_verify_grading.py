"""The math-verify grader agrees with tinker-cookbook 0.6.1's `grade_answer_math_verify` on the
same answers: boxed forms (extracted first, as both envs do), fractions, radicals, LaTeX
spellings, tuples and intervals, right and wrong; and it grades competition answers the numeric
grader cannot."""

from __future__ import annotations

import threading

import pytest

from cookbook.envs.math_grading import GRADERS, extract_boxed, grade_answer_math_verify

cookbook_grading = pytest.importorskip("tinker_cookbook.recipes.math_rl.math_grading")

# (model output, reference answer as the dataset holds it)
CASES = [
    ("so \\boxed{\\frac{1}{2}}", "\\frac{1}{2}"),
    ("\\boxed{0.5}", "\\frac12"),
    ("\\boxed{\\dfrac{3}{4}}", "0.75"),
    ("\\boxed{3/4}", "\\tfrac{3}{4}"),
    ("\\boxed{\\sqrt{8}}", "2\\sqrt{2}"),
    ("\\boxed{2\\sqrt2}", "\\sqrt{8}"),
    ("\\boxed{\\frac{\\pi}{2}}", "\\pi/2"),
    ("\\boxed{(1, 2)}", "(1,2)"),
    ("\\boxed{(2, 1)}", "(1,2)"),
    ("\\boxed{[0, 1)}", "[0,1)"),
    ("\\boxed{x = 5}", "5"),
    ("\\boxed{5}", "x=5"),
    ("\\boxed{\\text{(B)}}", "B"),
    ("\\boxed{18}", "18"),
    ("\\boxed{1,000}", "1000"),
    ("\\boxed{17}", "18"),
    ("\\boxed{\\frac{2}{3}}", "\\frac{3}{2}"),
    ("\\boxed{x^2+2x+1}", "(x+1)^2"),
    ("\\boxed{x^2+1}", "(x+1)^2"),
    ("\\boxed{10^{\\circ}}", "10"),
    ("\\boxed{\\$5.00}", "5"),
    ("\\boxed{50\\%}", "50"),
    ("\\boxed{-\\frac{1}{3}}", "-1/3"),
    ("\\boxed{\\infty}", "\\infty"),
    ("\\boxed{\\{1,2,3\\}}", "\\{3,2,1\\}"),
]


@pytest.mark.parametrize(("output", "reference"), CASES)
def test_math_verify_grades_as_the_cookbook_does(output: str, reference: str) -> None:
    given = extract_boxed(output)
    assert given == cookbook_grading.extract_boxed(output)
    ours = grade_answer_math_verify(given, reference)
    assert ours == cookbook_grading.grade_answer_math_verify(given, reference)


def test_the_cases_hold_both_verdicts_and_cases_numeric_grading_misses() -> None:
    verdicts = [grade_answer_math_verify(extract_boxed(o), r) for o, r in CASES]
    assert 0 < sum(verdicts) < len(verdicts)
    assert grade_answer_math_verify("\\sqrt{8}", "2\\sqrt{2}")
    assert not GRADERS["numeric"]("\\sqrt{8}", "2\\sqrt{2}")


def test_math_verify_grades_outside_the_main_thread() -> None:
    """math-verify's own timeouts need SIGALRM; off the main thread it must still grade (the
    cookbook's safe_grade runs it in a worker thread, where it raises and every answer fails)."""
    out: list[bool] = []
    worker = threading.Thread(
        target=lambda: out.append(grade_answer_math_verify("\\frac{1}{2}", "0.5"))
    )
    worker.start()
    worker.join()
    assert out == [True]
