"""Comparison types, field for field as tinker-cookbook 0.6.1's `preference/types.py`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from train_core.renderers.types import Message

Label = Literal["A", "B", "Tie"]
LABELS: tuple[str, ...] = ("A", "B", "Tie")


@dataclass
class Comparison:
    """Two candidate completions (A and B) of the same prompt conversation."""

    prompt_conversation: list[Message]
    completion_A: list[Message]
    completion_B: list[Message]

    def swap(self) -> Comparison:
        """The same comparison with A and B exchanged."""
        return Comparison(self.prompt_conversation, self.completion_B, self.completion_A)


@dataclass
class LabeledComparison:
    """A Comparison with the preferred side: "A", "B" or "Tie"."""

    comparison: Comparison
    label: Label

    def __post_init__(self) -> None:
        if self.label not in LABELS:
            raise ValueError(
                f"LabeledComparison.label is {self.label!r}; expected one of A, B, Tie"
            )

    def swap(self) -> LabeledComparison:
        """A/B exchanged and the label flipped with them (a Tie stays a Tie)."""
        flipped: Label = "B" if self.label == "A" else "A" if self.label == "B" else "Tie"
        return LabeledComparison(self.comparison.swap(), flipped)

    def chosen_and_rejected(self) -> tuple[list[Message], list[Message]]:
        """(chosen completion, rejected completion); a Tie has no preferred side."""
        if self.label == "Tie":
            raise ValueError("LabeledComparison: a Tie has no chosen/rejected side")
        a, b = self.comparison.completion_A, self.comparison.completion_B
        return (a, b) if self.label == "A" else (b, a)
