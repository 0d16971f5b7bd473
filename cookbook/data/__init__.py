"""Bundled datasets, written for this project by scripts/make_bundled_data.py (do not hand-edit).

`index.json` lists each dataset: its row shape, split files and row counts. The engine's dataset
store finds this folder by package name and reads `bundled:NAME` through the index; this module
is for people and recipes that want the list or the teacher prompt:

    chat            {"messages": [...]}: Pip, concise answers signed "Happy cooking!" (train, test)
    prefs           comparison rows {"prompt_conversation", "completion_A", "completion_B",
                    "label", "kind"} (train, test)
    math            openai/gsm8k rows {"question", "answer": "...#### N"} (train, test)
    code            converted DeepCoder rows {"id", "problem", "starter_code", "tests",
                    "solution"} (train)
    prompt_distill  {"prompt"} user questions; teacher system prompt in prompt_distill_system.txt
                    (train, test)
    long_conversations  {"messages": [...]}: long sessions with Pip (3k-15k tokens) ending in a
                    question about their first question (train, test)
    shapes          {"image": PNG data URI, "label": colour, "colour", "shape"}: one coloured shape
                    per 64x64 picture, 4 colours x 3 shapes (train, test)
    decisions       {"question", "choices": [[label, description]], "answer", "probs"}: chance
                    questions with known odds, for the decisions recipe (train, test)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

DATA_DIR = Path(__file__).resolve().parent


def index() -> dict[str, dict[str, Any]]:
    """The bundled datasets' index: name -> {"shape", "description", "splits", "rows"}."""
    return json.loads((DATA_DIR / "index.json").read_text(encoding="utf-8"))


def bundled_path(name: str, split: str = "train") -> Path:
    """The JSONL file of split `split` of bundled dataset `name`."""
    return DATA_DIR / index()[name]["splits"][split]


def teacher_system_prompt() -> str:
    """The long system prompt the prompt-distillation teacher answers `prompt_distill` under."""
    return (DATA_DIR / index()["prompt_distill"]["teacher_system_prompt"]).read_text(
        encoding="utf-8"
    )
