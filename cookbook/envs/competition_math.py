"""Competition math envs, as tinker-cookbook 0.6.1's math_rl datasets: Hendrycks MATH (trained on
every subject's train and test split less the MATH-500 problems, evaluated on MATH-500), MATH-500
alone, DeepMath-103K and Polaris-53K (train only). Answers in \\boxed{}, graded by math-verify by
default; the prompt suffix and few-shot example are the cookbook's MathEnv's.

`source="hub"` reads the hub datasets the cookbook names; `source="bundled"` reads a few rows
of each in the same shapes, shipped in cookbook/data (offline runs and tests).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from cookbook.datasets.catalog import RowConverter, convert_rows, resolve_source
from cookbook.datasets.competition_math import (
    HENDRYCKS_CONFIGS,
    deepmath_row,
    hendrycks_math_row,
    polaris_row,
)
from cookbook.envs.math import MathDataset, MathEnv
from kitchen.engine.errors import ConfigError
from kitchen.ports import DatasetStore
from train_core.rl.types import RLEnvContext

log = logging.getLogger("kitchen")

QUESTION_SUFFIX = " Write your answer in \\boxed{} format."

Split = tuple[str, str]  # (store source, split)

MATH500: Split = ("HuggingFaceH4/MATH-500", "test")


@dataclass(frozen=True)
class MathSet:
    """Where a competition set's rows are, on the hub and bundled, and how they read."""

    train: tuple[Split, ...]
    test: Split | None
    bundled_train: Split
    bundled_test: Split | None
    convert: RowConverter
    fewshot: bool  # the cookbook prefixes its few-shot example to MATH only
    drop_test_problems: bool = False  # MATH's train rows hold MATH-500's problems


MATH_SETS: dict[str, MathSet] = {
    "hendrycks_math": MathSet(
        train=tuple(
            (f"EleutherAI/hendrycks_math:{c}", split)
            for c in HENDRYCKS_CONFIGS
            for split in ("train", "test")
        ),
        test=MATH500,
        bundled_train=("bundled:hendrycks_math", "train"),
        bundled_test=("bundled:math500", "test"),
        convert=hendrycks_math_row,
        fewshot=True,
        drop_test_problems=True,
    ),
    "math500": MathSet(
        train=(MATH500,),
        test=MATH500,
        bundled_train=("bundled:math500", "test"),
        bundled_test=("bundled:math500", "test"),
        convert=hendrycks_math_row,
        fewshot=True,
    ),
    "deepmath": MathSet(
        train=(("zwhe99/DeepMath-103K", "train"),),
        test=None,
        bundled_train=("bundled:deepmath", "train"),
        bundled_test=None,
        convert=deepmath_row,
        fewshot=False,
    ),
    "polaris": MathSet(
        train=(("POLARIS-Project/Polaris-Dataset-53K", "train"),),
        test=None,
        bundled_train=("bundled:polaris", "train"),
        bundled_test=None,
        convert=polaris_row,
        fewshot=False,
    ),
}


def _rows(store: DatasetStore, splits: tuple[Split, ...], convert: RowConverter) -> list[dict]:
    rows: list[dict] = []
    for source, split in splits:
        rows += convert_rows(store.load(resolve_source(source), split), convert).rows
    return rows


@dataclass(frozen=True)
class CompetitionMathEnvs:
    """The env dataset factory of one competition set: its train rows shuffled by seed, and the
    first `test_problems` of its test rows (when it has a test split) for evaluation."""

    name: str
    groups_per_batch: int
    group_size: int
    source: str = "hub"
    grader: str = "math_verify"
    include_fewshot: bool = True
    seed: int = 0
    test_problems: int = 32

    def __call__(self, ctx: RLEnvContext) -> tuple[MathDataset, MathDataset | None]:
        if ctx.datasets is None:
            raise ConfigError(f"the {self.name} env needs a dataset store; none is configured")
        spec = MATH_SETS[self.name]
        bundled = self.source == "bundled"
        train_splits = (spec.bundled_train,) if bundled else spec.train
        test_split = spec.bundled_test if bundled else spec.test
        rows = _rows(ctx.datasets, train_splits, spec.convert)
        test_rows = _rows(ctx.datasets, (test_split,), spec.convert) if test_split else []
        if spec.drop_test_problems:
            held_out = {r["question"] for r in test_rows}
            rows = [r for r in rows if r["question"] not in held_out]
        order = np.random.default_rng(self.seed).permutation(len(rows))
        prefix = (
            MathEnv.standard_fewshot_prefix(QUESTION_SUFFIX)
            if self.include_fewshot and spec.fewshot
            else None
        )

        def dataset(rows: list[dict], batch_size: int, group_size: int) -> MathDataset:
            return MathDataset(rows, ctx.renderer, batch_size, group_size, prefix, self.name,
                               self.grader, QUESTION_SUFFIX)  # fmt: skip

        train = dataset([rows[i] for i in order], self.groups_per_batch, self.group_size)
        test_rows = test_rows[: self.test_problems]
        if not test_rows:
            return train, None
        return train, dataset(test_rows, len(test_rows), 1)
