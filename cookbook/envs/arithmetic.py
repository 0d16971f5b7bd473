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

import numpy as np

from cookbook.envs.synthetic import SyntheticEnvs
from train_core.completers import RendererLike
from train_core.renderers.types import Message
from train_core.rl.problem_env import ProblemEnv, ProblemGroupBuilder
from train_core.rl.types import EnvGroupBuilder

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


@dataclass(frozen=True)
class ArithmeticEnvs(SyntheticEnvs):
    """Builds the arithmetic train set and a held-out test set (one env per problem), problems with
    operands in 0..max_operand."""

    max_operand: int = 100
    include_fewshot: bool = True

    def problems(
        self, rng: np.random.Generator, renderer: RendererLike, batch_size: int, group_size: int
    ) -> Sequence[EnvGroupBuilder]:
        operands = rng.integers(0, self.max_operand + 1, size=(batch_size, 2))
        prefix = ArithmeticEnv.standard_fewshot_prefix() if self.include_fewshot else None
        return [
            ProblemGroupBuilder(
                env_thunk=partial(ArithmeticEnv, int(x), int(y), renderer, convo_prefix=prefix),
                num_envs=group_size,
                dataset_name="arithmetic",
            )
            for x, y in operands
        ]
