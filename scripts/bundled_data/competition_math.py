"""Competition math rows in the shapes of the hub datasets the math_rl envs read, written for this
project (a handful each, so the envs run offline): Hendrycks MATH (EleutherAI/hendrycks_math),
its MATH-500 test subset (HuggingFaceH4/MATH-500), DeepMath-103K (zwhe99/DeepMath-103K) and
Polaris-53K (POLARIS-Project/Polaris-Dataset-53K). Answers are LaTeX, as upstream: fractions,
radicals, tuples and intervals, graded by math-verify."""

from __future__ import annotations

# (problem, worked solution ending in \boxed{answer}, answer, subject, level)
PROBLEMS = [
    ("What is the value of $\\frac{1}{2} + \\frac{1}{3}$?",
     "A common denominator is $6$: $\\frac{3}{6} + \\frac{2}{6} = \\boxed{\\frac{5}{6}}$.",
     "\\frac{5}{6}", "Prealgebra", 1),
    ("Simplify $\\sqrt{72}$.",
     "$72 = 36 \\cdot 2$, so $\\sqrt{72} = \\boxed{6\\sqrt{2}}$.",
     "6\\sqrt{2}", "Prealgebra", 2),
    ("Solve for $x$: $3x - 7 = 11$.",
     "Adding $7$ gives $3x = 18$, so $x = \\boxed{6}$.",
     "6", "Algebra", 1),
    ("Find the ordered pair $(x, y)$ with $x + y = 7$ and $x - y = 1$.",
     "Adding the equations gives $2x = 8$, so $x = 4$ and $y = 3$: $\\boxed{(4,3)}$.",
     "(4,3)", "Algebra", 2),
    ("For which real $x$ is $x^2 - 5x + 6 < 0$? Give your answer in interval notation.",
     "$x^2 - 5x + 6 = (x-2)(x-3)$ is negative between its roots: $\\boxed{(2,3)}$.",
     "(2,3)", "Intermediate Algebra", 3),
    ("How many positive divisors does $36$ have?",
     "$36 = 2^2 \\cdot 3^2$ has $(2+1)(2+1) = \\boxed{9}$ divisors.",
     "9", "Number Theory", 2),
    ("What is the remainder when $2^{10}$ is divided by $7$?",
     "$2^3 = 8 \\equiv 1 \\pmod 7$, so $2^{10} = (2^3)^3 \\cdot 2 \\equiv 2$. The remainder is $\\boxed{2}$.",
     "2", "Number Theory", 3),
    ("A fair coin is flipped $3$ times. What is the probability of exactly two heads? Express your answer as a common fraction.",
     "There are $\\binom{3}{2} = 3$ favourable outcomes of $8$: $\\boxed{\\frac{3}{8}}$.",
     "\\frac{3}{8}", "Counting & Probability", 2),
    ("In how many ways can $5$ books be arranged on a shelf?",
     "$5! = \\boxed{120}$.",
     "120", "Counting & Probability", 1),
    ("The legs of a right triangle are $5$ and $12$. What is the length of its hypotenuse?",
     "$\\sqrt{5^2 + 12^2} = \\sqrt{169} = \\boxed{13}$.",
     "13", "Geometry", 1),
    ("What is the area of a circle of radius $3$? Express your answer in terms of $\\pi$.",
     "$\\pi r^2 = \\boxed{9\\pi}$.",
     "9\\pi", "Geometry", 1),
    ("Compute $\\sin^2 \\frac{\\pi}{4}$.",
     "$\\sin \\frac{\\pi}{4} = \\frac{\\sqrt{2}}{2}$, whose square is $\\boxed{\\frac{1}{2}}$.",
     "\\frac{1}{2}", "Precalculus", 2),
]  # fmt: skip

TYPES = {"Counting & Probability": "counting_and_probability"}


def make_hendrycks_math() -> tuple[list[dict], list[dict]]:
    """(EleutherAI/hendrycks_math rows, HuggingFaceH4/MATH-500 rows): the last four problems
    are the MATH-500 ones, so the train rows hold the other eight, as the cookbook filters them."""
    math_rows = [
        {"problem": p, "level": f"Level {lvl}", "type": subject, "solution": s}
        for p, s, _, subject, lvl in PROBLEMS[:8]
    ]
    math500 = [
        {"problem": p, "solution": s, "answer": a, "subject": subject, "level": lvl,
         "unique_id": f"test/{TYPES.get(subject, subject.lower().replace(' ', '_'))}/{i}.json"}
        for i, (p, s, a, subject, lvl) in enumerate(PROBLEMS[8:])
    ]  # fmt: skip
    return math_rows, math500


def make_deepmath() -> list[dict]:
    """zwhe99/DeepMath-103K rows: a question, its final answer, three long solutions upstream
    (one short one here, the others empty)."""
    rows = [
        ("Evaluate the limit $\\lim_{x \\to 0} \\frac{\\sin 3x}{x}$.", "3", 3.0, "Mathematics -> Calculus -> Limits"),
        ("Find the sum of the series $\\sum_{n=1}^{\\infty} \\frac{1}{2^n}$.", "1", 3.5, "Mathematics -> Calculus -> Series"),
        ("Compute $\\int_0^1 2x \\, dx$.", "1", 2.0, "Mathematics -> Calculus -> Integral Calculus"),
        ("Find the determinant of the matrix $\\begin{pmatrix} 2 & 1 \\\\ 1 & 2 \\end{pmatrix}$.", "3", 2.5, "Mathematics -> Algebra -> Linear Algebra"),
        ("What is the smallest prime $p$ such that $p^2 + 2$ is also prime?", "3", 4.0, "Mathematics -> Number Theory -> Prime Numbers"),
        ("Find all real $x$ with $|x - 1| \\le 2$.", "[-1, 3]", 2.0, "Mathematics -> Algebra -> Inequalities"),
        ("Evaluate $\\log_2 \\sqrt{8}$.", "\\dfrac{3}{2}", 2.5, "Mathematics -> Algebra -> Logarithms"),
        ("How many elements of order $2$ does the cyclic group $\\mathbb{Z}_{12}$ have?", "1", 4.5, "Mathematics -> Algebra -> Group Theory"),
    ]  # fmt: skip
    return [
        {"question": q, "final_answer": a, "difficulty": d, "topic": t,
         "r1_solution_1": f"Working it through, the answer is $\\boxed{{{a}}}$.",
         "r1_solution_2": "", "r1_solution_3": ""}
        for q, a, d, t in rows
    ]  # fmt: skip


def make_polaris() -> list[dict]:
    """POLARIS-Project/Polaris-Dataset-53K rows: {"problem", "answer", "difficulty"}."""
    rows = [
        ("Let $a$ and $b$ be positive reals with $a + b = 1$. Find the maximum of $ab$.", "\\frac{1}{4}", "3/8"),
        ("How many integers $n$ with $1 \\le n \\le 100$ are divisible by $3$ or $5$?", "47", "4/8"),
        ("Find the number of ordered pairs of positive integers $(a, b)$ with $ab = 12$.", "6", "2/8"),
        ("What is the sum of the interior angles of a hexagon, in degrees?", "720", "1/8"),
        ("If $f(x) = x^2 + 1$, find $f(f(1))$.", "5", "1/8"),
        ("Find the positive solution of $x^2 = 2$.", "\\sqrt{2}", "0/8"),
        ("The roots of $x^2 - 4x + 1 = 0$ are $r$ and $s$. Find $r^2 + s^2$.", "14", "5/8"),
        ("What is the last digit of $7^{2024}$?", "1", "6/8"),
    ]  # fmt: skip
    return [{"problem": p, "answer": a, "difficulty": d} for p, a, d in rows]
