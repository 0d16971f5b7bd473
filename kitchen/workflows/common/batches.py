"""Epoch order and batches over `train_data`, in groups of `group_size` consecutive datums that
move together (1 for SFT; 2 for DPO's interleaved (chosen, rejected) pairs)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from kitchen.engine.stage import Context, Metrics


def epoch_order(seed: int, epoch: int, n: int) -> list[int]:
    """The order of n examples in an epoch: a pure function of (seed, epoch), so a resumed run
    sees the batches the interrupted one would have."""
    return np.random.default_rng([seed, epoch]).permutation(n).tolist()


@dataclass(frozen=True, kw_only=True)
class ShuffleEpoch:
    """A fresh permutation of the groups of `train_data` per epoch, a pure function of (seed,
    epoch): a resumed run sees the same order."""

    seed: int = 0
    group_size: int = 1
    name: str = "shuffle_epoch"
    reads: frozenset[str] = frozenset({"train_data", "epoch_idx"})
    writes: frozenset[str] = frozenset({"order"})

    def __call__(self, ctx: Context[Any]) -> Metrics | None:
        n_groups = len(ctx.state.train_data) // self.group_size
        ctx.state.order = epoch_order(self.seed, ctx.state.epoch_idx, n_groups)
        return None


@dataclass(frozen=True, kw_only=True)
class GetBatch:
    """This step's `batch_size` groups, in epoch order, as a flat list of datums."""

    batch_size: int
    group_size: int = 1
    name: str = "get_batch"
    reads: frozenset[str] = frozenset({"train_data", "order", "batch_idx"})
    writes: frozenset[str] = frozenset({"batch"})

    def __call__(self, ctx: Context[Any]) -> Metrics | None:
        start = ctx.state.batch_idx * self.batch_size
        data, g = ctx.state.train_data, self.group_size
        ctx.state.batch = [
            data[g * i + j]
            for i in ctx.state.order[start : start + self.batch_size]
            for j in range(g)
        ]
        return None
