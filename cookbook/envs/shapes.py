"""Name what the picture shows: single-turn RL whose prompt carries an image (the bundled `shapes`
pictures, or any rows with an image and a class column), graded by the word the answer names.

The prompt is the picture then vlm_classifier's question (tinker-cookbook's "What is the name of
the subject in this photo?"), so a model that vlm_classifier fine-tuned answers in its format and RL
goes on from there; the class is the row's `target` column (the colour, or the shape). The answer is
correct when the first of the task's class words it names is the row's class, and well formed when
it names exactly one of them. Reward as ProblemEnv's: 1 for a correct answer, minus format_coef
when it is malformed.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal

import numpy as np

from cookbook.datasets.images import QUESTION, image_data_uri
from cookbook.envs.problem_rows import ProblemRows
from kitchen.engine.errors import ConfigError, DataError
from train_core.completers import RendererLike
from train_core.renderers.types import Message
from train_core.rl.problem_env import ProblemEnv
from train_core.rl.types import RLEnvContext

Target = Literal["colour", "shape"]


def named_classes(text: str, classes: Sequence[str]) -> list[str]:
    """The class words `text` names, in the order it names them (whole words, any case)."""
    found = []
    for match in re.finditer(r"[a-z]+", text.lower()):
        if match.group() in classes:
            found.append(match.group())
    return found


class ImageClassEnv(ProblemEnv):
    """One picture, one question; the answer is graded by the class word it names first."""

    def __init__(
        self,
        image: str,
        answer: str,
        classes: Sequence[str],
        question: str,
        renderer: RendererLike,
        format_coef: float = 0.1,
    ) -> None:
        super().__init__(renderer, None, format_coef)
        self.image, self.answer, self.classes, self.question = image, answer, classes, question

    def _conversation(self) -> list[Message]:
        content: Any = [
            {"type": "image", "image": self.image},
            {"type": "text", "text": self.question},
        ]
        return [{"role": "user", "content": content}]

    def get_question(self) -> str:
        return self.question

    def check_answer(self, sample_str: str) -> bool:
        named = named_classes(sample_str, self.classes)
        return bool(named) and named[0] == self.answer

    def check_format(self, sample_str: str) -> bool:
        return len(set(named_classes(sample_str, self.classes))) == 1

    def get_reference_answer(self) -> str:
        return self.answer


class ImageClassDataset(ProblemRows):
    """Consecutive slices of `rows` ({"image", "answer"}), one group of `group_size` per row."""

    def __init__(
        self,
        rows: list[dict[str, str]],
        classes: Sequence[str],
        question: str,
        renderer: RendererLike,
        batch_size: int,
        group_size: int,
    ) -> None:
        super().__init__(rows, batch_size, group_size, "shapes")
        self.classes, self.question, self.renderer = classes, question, renderer

    def env_of(self, row: dict[str, str]) -> Callable[[], ImageClassEnv]:
        return partial(ImageClassEnv, row["image"], row["answer"], self.classes, self.question,
                       self.renderer)  # fmt: skip


@dataclass(frozen=True)
class ShapesEnvs:
    """The env dataset factory: train rows of `source` shuffled by seed, and the first
    `test_problems` rows of its test split (one env each) for evaluation. The classes are every
    value of the `target` column in the train rows."""

    source: str
    groups_per_batch: int
    group_size: int
    target: Target = "colour"
    seed: int = 0
    test_problems: int = 32

    def __call__(self, ctx: RLEnvContext) -> tuple[ImageClassDataset, ImageClassDataset | None]:
        if ctx.datasets is None:
            raise ConfigError("the shapes env needs a dataset store; none is configured")
        rows = self._rows(ctx.datasets, "train")
        classes = sorted({r["answer"] for r in rows})
        order = np.random.default_rng(self.seed).permutation(len(rows))
        train = ImageClassDataset(
            [rows[i] for i in order],
            classes,
            QUESTION,
            ctx.renderer,
            self.groups_per_batch,
            self.group_size,
        )
        if self.test_problems == 0:
            return train, None
        test_rows = self._rows(ctx.datasets, "test")[: self.test_problems]
        return train, ImageClassDataset(
            test_rows, classes, QUESTION, ctx.renderer, len(test_rows), 1
        )

    def _rows(self, store: Any, split: str) -> list[dict[str, str]]:
        rows = store.load(self.source, split)
        where = getattr(rows, "where", lambda i: f"{self.source} ({split}) row {i}")
        out = []
        for i, row in enumerate(rows):
            answer = row.get(self.target)
            if not isinstance(answer, str) or not answer:
                raise DataError(
                    f"{where(i)}: field {self.target!r} is {answer!r}; expected a class name"
                )
            image = image_data_uri(row.get("image"), where(i))
            out.append({"image": image, "answer": answer.lower()})
        return out
