"""What the synthetic envs (arithmetic, guess_number) share: batches drawn from a seeded stream, and
a train set beside a held-out test set from another stream."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import KW_ONLY, dataclass
from typing import Any

import numpy as np

from train_core.completers import RendererLike
from train_core.rl.types import EnvGroupBuilder, RLDataset, RLEnvContext

# Batches a generated env makes when the run names no num_batches (tinker-cookbook's arithmetic).
SYNTHETIC_BATCHES = 100


@dataclass(eq=False)
class SeededBatches(RLDataset):
    """`n_batches` batches of `batch_size` problems, each a group of `group_size` envs, drawn by
    `envs.problems`. Batch i is a pure function of (envs.seed, stream, i): a resumed run sees the
    same problems."""

    envs: SyntheticEnvs
    renderer: RendererLike
    batch_size: int
    group_size: int
    n_batches: int
    stream: int = 0

    def get_batch(self, index: int) -> Sequence[EnvGroupBuilder]:
        rng = np.random.default_rng([self.envs.seed, self.stream, index])
        return self.envs.problems(rng, self.renderer, self.batch_size, self.group_size)

    def __len__(self) -> int:
        return self.n_batches


@dataclass(frozen=True)
class SyntheticEnvs:
    """An env dataset factory: the train set (stream 0) and, unless `test_problems` is 0, a test
    set of `test_problems` one-env groups from stream 1 (problems the training never draws). A
    subclass adds its options as fields and draws a batch's groups in `problems`, so the datasets
    read the options from the factory instead of carrying copies."""

    groups_per_batch: int
    group_size: int
    n_batches: int = SYNTHETIC_BATCHES
    _: KW_ONLY
    seed: int = 0
    test_problems: int = 32

    def problems(
        self, rng: np.random.Generator, renderer: RendererLike, batch_size: int, group_size: int
    ) -> Sequence[EnvGroupBuilder]:
        """`batch_size` groups of `group_size` envs, drawn from `rng`."""
        raise NotImplementedError

    def __call__(self, ctx: RLEnvContext) -> tuple[SeededBatches, Any]:
        train = SeededBatches(
            self, ctx.renderer, self.groups_per_batch, self.group_size, self.n_batches
        )
        if self.test_problems == 0:
            return train, None
        return train, SeededBatches(self, ctx.renderer, self.test_problems, 1, 1, stream=1)
