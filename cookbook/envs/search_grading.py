"""Grading a Search-R1 answer, as tinker-cookbook 0.6.1's search_tool grades it: the reply's text
after its one `Answer:` is the answer; answers compare after normalisation (lower case, no
punctuation, no articles a/an/the, single spaces); reward = format_coef * (has_answer - 1) +
exact_match, so a right answer earns 1, a wrong one 0, a reply without `Answer:` -format_coef."""

from __future__ import annotations

import re
import string
from collections.abc import Sequence

_PUNCTUATION = set(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize_answer(text: str) -> str:
    """Lower case, punctuation dropped, articles dropped, whitespace collapsed (in that order)."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def extract_answer(text: str) -> str | None:
    """The text after `Answer:`, stripped; None unless `Answer:` occurs exactly once."""
    parts = text.split("Answer:")
    return parts[1].strip() if len(parts) == 2 else None


def exact_match(answer: str, golds: Sequence[str]) -> bool:
    target = normalize_answer(answer)
    return any(target == normalize_answer(g) for g in golds)


def answer_reward(
    text: str, golds: Sequence[str], format_coef: float
) -> tuple[float, dict[str, float]]:
    """(reward, {"format", "correct"}) of a final reply; see the module doc."""
    answer = extract_answer(text)
    has_answer = float(answer is not None)
    correct = float(answer is not None and bool(golds) and exact_match(answer, golds))
    return format_coef * (has_answer - 1.0) + correct, {"format": has_answer, "correct": correct}
