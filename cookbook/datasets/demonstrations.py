"""SDFT's demonstration sets (tinker-cookbook 0.6.1's recipes/sdft/datasets.py) -> the chat shape
{"messages": [user: the question, assistant: the golden answer]}, which the sdft recipe reads as
(question, golden answer) pairs.

- SciKnowEval (hicai-zju/SciKnowEval, its one split "test"): rows {"question", "choices":
  {"label": [...], "text": [...]}, "answerKey", "domain", "details": {"level"}, "type"}. Only
  level-L3 multiple-choice rows are demonstrations (others convert to None); the question is the
  stem, the "A: text" choice lines and the cookbook's answer instruction; the golden answer is
  the answer letter alone. "domain" is kept (the recipe keeps one domain, Chemistry by default).
- ToolAlpaca: the hub's rows (tangqiaoyu/ToolAlpaca) {"instruction", "output"}, or the SDFT
  paper's preprocessed rows {"prompt", "golden_response": str | [str, ...]} (a list joined by
  newlines).

Neither set has a held-out split: `carve_demonstrations` shuffles the converted rows with
random.Random(seed 42) and keeps the first 90% for training, as the cookbook does.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cookbook.datasets.fields import bad_field, field_path, require, require_str

SCIKNOWEVAL_INSTRUCTION = (
    "Please reason step by step, then give your answer as <answer>X</answer> "
    "where X is the letter of the correct option."
)


def _demonstration(question: str, answer: str, **extra: Any) -> dict[str, Any]:
    messages = [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]
    return {"messages": messages, **extra}


def sciknoweval_row(row: Mapping[str, Any], where: str = "row") -> dict[str, Any] | None:
    """A level-L3 multiple-choice SciKnowEval row -> its demonstration (None for other rows)."""
    details = row.get("details") or {}
    level = details.get("level") if isinstance(details, Mapping) else None
    if level != "L3" or "mcq" not in str(row.get("type", "")):
        return None
    question = require_str(row, "question", where)
    choices = require(row, "choices", where, '{"label": [...], "text": [...]}')
    labels = choices.get("label") if isinstance(choices, Mapping) else None
    texts = choices.get("text") if isinstance(choices, Mapping) else None
    if not isinstance(labels, list) or not isinstance(texts, list):
        raise bad_field(where, field_path("choices"), choices, '{"label": [...], "text": [...]}')
    lines = "\n".join(f"{label}: {text}" for label, text in zip(labels, texts, strict=False))
    answer = require(row, "answerKey", where, "the correct option's letter")
    prompt = f"{question}\n\n{lines}\n{SCIKNOWEVAL_INSTRUCTION}"
    return _demonstration(prompt, str(answer), domain=str(row.get("domain", "")))


def toolalpaca_row(row: Mapping[str, Any], where: str = "row") -> dict[str, Any]:
    """A ToolAlpaca row, the hub's {"instruction", "output"} or the paper's {"prompt",
    "golden_response"} -> its demonstration."""
    if "prompt" in row:
        prompt = require_str(row, "prompt", where)
        golden = require(row, "golden_response", where, "a string or a list of strings")
        answer = "\n".join(golden) if isinstance(golden, list) else str(golden)
        return _demonstration(prompt, answer)
    instruction = require_str(row, "instruction", where)
    output = require(row, "output", where, "the tool-use response")
    return _demonstration(instruction, str(output))


@dataclass(frozen=True)
class DemonstrationSet:
    """Where a demonstration set's rows are (store source, split), on the hub and bundled."""

    hub: tuple[str, str]
    bundled: tuple[str, str]
    convert: Any  # a RowConverter
    by_domain: bool = False  # keep the rows of one domain (SciKnowEval)


DEMONSTRATION_SETS: dict[str, DemonstrationSet] = {
    "sciknoweval": DemonstrationSet(
        ("hicai-zju/SciKnowEval", "test"), ("bundled:sciknoweval", "train"), sciknoweval_row, True
    ),
    "toolalpaca": DemonstrationSet(
        ("tangqiaoyu/ToolAlpaca", "train"), ("bundled:toolalpaca", "train"), toolalpaca_row
    ),
}


def carve_demonstrations(
    rows: Sequence[dict[str, Any]], train_fraction: float = 0.9, seed: int = 42
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(train, test): the rows shuffled by random.Random(seed), the first
    int(len * train_fraction) of them for training, the rest held out (the cookbook's split)."""
    order = list(rows)
    random.Random(seed).shuffle(order)
    cut = int(len(order) * train_fraction)
    return order[:cut], order[cut:]
