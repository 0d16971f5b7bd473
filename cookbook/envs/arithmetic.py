"""Synthetic addition problems ("What is 23 + 58?"), graded by the last integer of the answer.

As tinker-cookbook's math_rl arithmetic env, with a difficulty knob: operands are drawn from
0..max_operand (tinker-cookbook: 100). Small operands let a 135M model start with some correct
answers, so the reward has somewhere to rise from.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from kitchen.workflows.reinforcement.stages import RLEnvContext
from train_core.completers import Message, RendererLike
from train_core.rl.problem_env import ProblemEnv, ProblemGroupBuilder
from train_core.rl.types import EnvGroupBuilder, RLDataset

_INTEGER = re.compile(r"-?\d+")


def extract_final_int(text: str) -> int | None:
    """The last integer in `text` (thousands separators ignored); None when there is none."""
    matches = _INTEGER.findall(text.replace(",", ""))
    return int(matches[-1]) if matches else None


class ArithmeticEnv(ProblemEnv):
    """x + y; correct when the response's last integer is the sum; any text is well formed."""

    def __init__(
        self,
        x: int,
        y: int,
        renderer: RendererLike,
        convo_prefix: list[Message] | None = None,
        format_coef: float = 0.1,
        require_stop_sequence_for_format: bool = True,
    ) -> None:
        super().__init__(renderer, convo_prefix, format_coef, require_stop_sequence_for_format)
        self.x, self.y = x, y

    def get_question(self) -> str:
        return f"What is {self.x} + {self.y}?"

    def check_answer(self, sample_str: str) -> bool:
        return extract_final_int(sample_str) == self.x + self.y

    def check_format(self, sample_str: str) -> bool:
        return True

    def get_reference_answer(self) -> str:
        return str(self.x + self.y)

    @staticmethod
    def standard_fewshot_prefix() -> list[Message]:
        return [
            {"role": "user", "content": "What is 4 + 5?"},
            {"role": "assistant", "content": "9"},
        ]


class ArithmeticDataset(RLDataset):
    """`n_batches` batches of `batch_size` problems, each a group of `group_size` envs. Batch i is
    a pure function of (seed, stream, i): a resumed run sees the same problems."""

    def __init__(
        self,
        renderer: RendererLike,
        batch_size: int,
        group_size: int,
        n_batches: int,
        max_operand: int = 100,
        include_fewshot: bool = True,
        seed: int = 0,
        stream: int = 0,
    ) -> None:
        self.renderer = renderer
        self.batch_size, self.group_size, self.n_batches = batch_size, group_size, n_batches
        self.max_operand, self.include_fewshot = max_operand, include_fewshot
        self.seed, self.stream = seed, stream

    def get_batch(self, index: int) -> Sequence[EnvGroupBuilder]:
        rng = np.random.default_rng([self.seed, self.stream, index])
        operands = rng.integers(0, self.max_operand + 1, size=(self.batch_size, 2))
        prefix = ArithmeticEnv.standard_fewshot_prefix() if self.include_fewshot else None
        return [
            ProblemGroupBuilder(
                env_thunk=partial(
                    ArithmeticEnv, int(x), int(y), self.renderer, convo_prefix=prefix
                ),
                num_envs=self.group_size,
                dataset_name="arithmetic",
            )
            for x, y in operands
        ]

    def __len__(self) -> int:
        return self.n_batches


@dataclass(frozen=True)
class ArithmeticEnvs:
    """Builds the arithmetic train set and a held-out test set (one env per problem)."""

    groups_per_batch: int
    group_size: int
    n_batches: int = 100
    max_operand: int = 100
    include_fewshot: bool = True
    seed: int = 0
    test_problems: int = 32

    def __call__(self, ctx: RLEnvContext) -> tuple[ArithmeticDataset, Any]:
        common: dict[str, Any] = {
            "max_operand": self.max_operand,
            "include_fewshot": self.include_fewshot,
            "seed": self.seed,
        }
        train = ArithmeticDataset(
            ctx.renderer, self.groups_per_batch, self.group_size, self.n_batches, **common
        )
        if self.test_problems == 0:
            return train, None
        test = ArithmeticDataset(ctx.renderer, self.test_problems, 1, 1, stream=1, **common)
        return train, test
