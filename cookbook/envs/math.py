"""Word problems answered inside \\boxed{} and graded by cookbook.envs.math_grading.

GSM8K-style rows come from the dataset store through cookbook.datasets (gsm8k_row): the bundled
`bundled:math` set, `openai/gsm8k` on the hub (alias `gsm8k`), or a local JSONL of
{"question", "answer": "...#### N"}. Prompt suffix and few-shot example as tinker-cookbook's
Gsm8kDataset and MathEnv. The competition sets (MATH, MATH-500, DeepMath, Polaris) reuse the env
and dataset with their own suffix and grader (cookbook/envs/competition_math.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from cookbook.envs.math_grading import GRADERS, extract_boxed
from cookbook.envs.problem_rows import ProblemRows
from kitchen.engine.errors import ConfigError, KitchenError
from train_core.completers import RendererLike
from train_core.renderers.types import Message
from train_core.rl.problem_env import ProblemEnv
from train_core.rl.types import RLEnvContext

log = logging.getLogger("kitchen")

QUESTION_SUFFIX = " Provide a numerical answer without units, written inside \\boxed{}."


class MathEnv(ProblemEnv):
    """A word problem; well formed with a \\boxed{} answer, correct when the box grades equal."""

    def __init__(
        self,
        problem: str,
        answer: str,
        renderer: RendererLike,
        convo_prefix: list[Message] | None = None,
        format_coef: float = 0.1,
        require_stop_sequence_for_format: bool = True,
        grader: str = "numeric",
        question_suffix: str = QUESTION_SUFFIX,
    ) -> None:
        super().__init__(renderer, convo_prefix, format_coef, require_stop_sequence_for_format)
        self.problem, self.answer = problem, answer
        self.grade, self.question_suffix = GRADERS[grader], question_suffix

    def get_question(self) -> str:
        return self.problem + self.question_suffix

    def check_format(self, sample_str: str) -> bool:
        try:
            extract_boxed(sample_str)
        except ValueError:
            return False
        return True

    def check_answer(self, sample_str: str) -> bool:
        try:
            given = extract_boxed(sample_str)
        except ValueError:
            return False
        return self.grade(given, self.answer)

    def get_reference_answer(self) -> str:
        return self.answer

    @staticmethod
    def standard_fewshot_prefix(question_suffix: str = QUESTION_SUFFIX) -> list[Message]:
        return [
            {"role": "user", "content": "How many r's are in strawberry?" + question_suffix},
            {
                "role": "assistant",
                "content": "Let's spell the word out and number all the letters: 1) s 2) t 3) r "
                "4) a 5) w 6) b 7) e 8) r 9) r 10) y. We have r's at positions 3, 8, and 9. "
                "\\boxed{3}",
            },
        ]


class MathDataset(ProblemRows):
    """Consecutive slices of `rows` ({"question", "answer"}), one group per row."""

    def __init__(
        self,
        rows: list[dict[str, Any]],
        renderer: RendererLike,
        batch_size: int,
        group_size: int,
        convo_prefix: list[Message] | None = None,
        dataset_name: str = "math",
        grader: str = "numeric",
        question_suffix: str = QUESTION_SUFFIX,
    ) -> None:
        super().__init__(rows, batch_size, group_size, dataset_name)
        self.renderer, self.convo_prefix = renderer, convo_prefix
        self.grader, self.question_suffix = grader, question_suffix

    def env_of(self, row: dict[str, Any]) -> Callable[[], MathEnv]:
        return partial(MathEnv, row["question"], row["answer"], self.renderer,
                       convo_prefix=self.convo_prefix, grader=self.grader,
                       question_suffix=self.question_suffix)  # fmt: skip


def dataset_tag(source: str) -> str:
    return "gsm8k" if "gsm8k" in source else "math"


@dataclass(frozen=True)
class MathEnvs:
    """Train rows of `source` shuffled by seed; the first `test_problems` rows of its `test_split`
    (when it has one) for evaluation."""

    source: str
    groups_per_batch: int
    group_size: int
    include_fewshot: bool = True
    seed: int = 0
    test_split: str = "test"
    test_problems: int = 32
    grader: str = "numeric"

    def __call__(self, ctx: RLEnvContext) -> tuple[MathDataset, MathDataset | None]:
        from cookbook.datasets.catalog import load_math

        if ctx.datasets is None:
            raise ConfigError("the math env needs a dataset store; none is configured")
        rows = load_math(ctx.datasets, self.source, "train")
        order = np.random.default_rng(self.seed).permutation(len(rows))
        prefix = MathEnv.standard_fewshot_prefix() if self.include_fewshot else None
        tag = dataset_tag(self.source)
        train = MathDataset(
            [rows[i] for i in order],
            ctx.renderer,
            self.groups_per_batch,
            self.group_size,
            prefix,
            tag,
            self.grader,
        )
        if self.test_problems == 0:
            return train, None
        try:
            test_rows = load_math(ctx.datasets, self.source, self.test_split)[: self.test_problems]
        except KitchenError as e:
            log.warning(
                "%s has no usable %r split (%s); no evaluation", self.source, self.test_split, e
            )
            return train, None
        return train, MathDataset(
            test_rows, ctx.renderer, len(test_rows), 1, prefix, tag, self.grader
        )
