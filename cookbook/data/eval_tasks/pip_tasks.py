"""Documents and metrics of the `pip_*` lm-eval tasks, built from the bundled held-out chat rows
(cookbook/data/chat_test.jsonl): the first user question of each conversation, and the answer Pip,
the kitchen assistant of `bundled:chat`, gives to it. A model fine-tuned on `bundled:chat`
(`kitchen run sl_basic`) should do better on both than its base model.

    pip_mc     multiple choice (loglikelihood): Pip's answer against three answers to other questions
    pip_chat   chat generation: does the reply sign off the way Pip does ("Happy cooking!")

Read by lm-eval through `custom_dataset: !function pip_tasks.<name>`; works offline.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

ROWS = Path(__file__).resolve().parent.parent / "chat_test.jsonl"
SIGN_OFF = "Happy cooking"


def _pairs() -> list[tuple[str, str]]:
    """(first user question, the assistant answer to it) of every held-out conversation."""
    pairs = []
    for line in ROWS.read_text().splitlines():
        messages = json.loads(line)["messages"]
        turns = [m for m in messages if m["role"] != "system"]
        if len(turns) >= 2 and turns[0]["role"] == "user" and turns[1]["role"] == "assistant":
            pairs.append((turns[0]["content"], turns[1]["content"]))
    return pairs


def multiple_choice(**_: Any) -> Any:
    """Each question with four answers: Pip's, at index (i mod 4), and the next three rows'."""
    import datasets

    pairs = _pairs()
    docs = []
    for i, (question, answer) in enumerate(pairs):
        others = [pairs[(i + k) % len(pairs)][1] for k in (1, 2, 3)]
        gold = i % 4
        docs.append(
            {
                "question": question,
                "choices": [*others[:gold], answer, *others[gold:]],
                "gold": gold,
            }
        )
    return {"test": datasets.Dataset.from_list(docs)}


def chat(**_: Any) -> Any:
    import datasets

    docs = [{"question": q, "answer": a} for q, a in _pairs()]
    return {"test": datasets.Dataset.from_list(docs)}


def signed_off(doc: dict[str, Any], results: list[str]) -> dict[str, float]:
    """1 when the reply signs off as Pip does."""
    return {"signed_off": float(SIGN_OFF.lower() in results[0].lower())}
