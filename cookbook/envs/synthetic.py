"""What the synthetic envs (arithmetic, guess_number) share: batches drawn from a seeded stream, and
a train set beside a held-out test set from another stream."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import KW_ONLY, dataclass, fields
from typing import Any, ClassVar

import numpy as np

from train_core.completers import RendererLike
from train_core.rl.types import EnvGroupBuilder, RLDataset, RLEnvContext


@dataclass(eq=False)
class SeededBatches(RLDataset):
    """`n_batches` batches of `batch_size` problems, each a group of `group_size` envs. Batch i is
    a pure function of (seed, stream, i): a resumed run sees the same problems. A subclass adds
    its options as fields and draws a batch's groups in `problems`."""

    renderer: RendererLike
    batch_size: int
    group_size: int
    n_batches: int
    _: KW_ONLY
    seed: int = 0
    stream: int = 0

    def get_batch(self, index: int) -> Sequence[EnvGroupBuilder]:
        return self.problems(np.random.default_rng([self.seed, self.stream, index]))

    def problems(self, rng: np.random.Generator) -> Sequence[EnvGroupBuilder]:
        """This batch's `batch_size` groups, drawn from `rng`."""
        raise NotImplementedError

    def __len__(self) -> int:
        return self.n_batches


@dataclass(frozen=True)
class SyntheticEnvs:
    """An env dataset factory: the train set (stream 0) and, unless `test_problems` is 0, a test
    set of `test_problems` one-env groups from stream 1 (problems the training never draws)."""

    groups_per_batch: int
    group_size: int
    n_batches: int = 100
    _: KW_ONLY
    seed: int = 0
    test_problems: int = 32

    # The dataset class; the factory's own fields (beyond these shared ones) are its options.
    batches: ClassVar[type[SeededBatches]]

    def dataset(
        self, renderer: RendererLike, batch_size: int, group_size: int, n_batches: int, stream: int
    ) -> SeededBatches:
        shared = {f.name for f in fields(SyntheticEnvs)}
        options = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in shared}
        return self.batches(
            renderer, batch_size, group_size, n_batches, seed=self.seed, stream=stream, **options
        )

    def __call__(self, ctx: RLEnvContext) -> tuple[SeededBatches, Any]:
        train = self.dataset(
            ctx.renderer, self.groups_per_batch, self.group_size, self.n_batches, 0
        )
        if self.test_problems == 0:
            return train, None
        return train, self.dataset(ctx.renderer, self.test_problems, 1, 1, 1)
