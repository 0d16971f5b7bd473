"""Preference (DPO) stages: comparisons -> datum pairs, reference logprobs per batch, and the DPO
loss of the shared train step (kitchen/workflows/common/train_step.py).

A batch is interleaved [chosen_0, rejected_0, chosen_1, ...] as tinker-cookbook's DPO batches are;
`train_core.preference.pairs` owns that layout. The math (pairing, truncation, the loss and its
metrics) is in `train_core.preference`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from tinker import types

from kitchen.engine.errors import DataError
from kitchen.engine.futures import APIFuture, gather
from kitchen.engine.stage import Context, Metrics, SourceToInto
from kitchen.workflows.preference.transcript import with_reference
from train_core.preference import (
    PAIR,
    Comparison,
    LabeledComparison,
    Overflow,
    build_dpo_data,
    make_dpo_loss_fn,
)
from train_core.scoring import score_full_sequences


def labeled_comparison(row: dict[str, Any]) -> LabeledComparison:
    """A comparison row (cookbook/datasets/comparison.py's shape) -> train_core's type."""
    comparison = Comparison(row["prompt_conversation"], row["completion_A"], row["completion_B"])
    return LabeledComparison(comparison, row["label"])


@dataclass(frozen=True, kw_only=True)
class BuildPreferenceDataset:
    """Render every comparison into a (chosen, rejected) datum pair; ties, pairs with nothing left
    to compare after truncation and (overflow="drop") pairs longer than max_length are dropped and
    counted. An epoch is n_pairs // batch_size batches (one batch of all pairs if fewer)."""

    batch_size: int
    max_length: int | None
    overflow: Overflow = "truncate"
    num_epochs: int = 1
    with_test: bool = True
    name: str = "build_preference_dataset"

    @property
    def reads(self) -> frozenset[str]:
        return frozenset(
            {"comparisons", "renderer"} | ({"test_comparisons"} if self.with_test else set())
        )

    @property
    def writes(self) -> frozenset[str]:
        out = {"train_data", "n_pairs", "n_batches", "total_steps"}
        return frozenset(out | ({"test_data"} if self.with_test else set()))

    def _pairs(self, rows: list[dict[str, Any]], renderer: Any, what: str) -> tuple[list[Any], Any]:
        data, stats = build_dpo_data(
            [labeled_comparison(r) for r in rows], renderer, self.max_length, self.overflow
        )
        if not data:
            raise DataError(
                f"{what}: none of {len(rows)} comparisons gave a usable pair (dropped: "
                f"{stats.dropped}); expected non-tie labels and completions within "
                f"max_length={self.max_length}"
            )
        return data, stats

    def __call__(self, ctx: Context[Any]) -> Metrics | None:
        state = ctx.state
        train, stats = self._pairs(state.comparisons, state.renderer, "train comparisons")
        metrics: Metrics = stats.metrics("data")
        if self.with_test:
            state.test_data, test_stats = self._pairs(
                state.test_comparisons, state.renderer, "test comparisons"
            )
            metrics.update(test_stats.metrics("data/test"))
        n_pairs = len(train) // PAIR
        if n_pairs < self.batch_size:
            ctx.logger.warning(
                "%d usable pairs, fewer than batch_size %d: one batch of all of them per epoch",
                n_pairs,
                self.batch_size,
            )
        state.train_data, state.n_pairs = train, n_pairs
        state.n_batches = max(n_pairs // self.batch_size, 1)
        state.total_steps = state.n_batches * self.num_epochs
        ctx.logger.info(
            "%d pairs (%d truncated, dropped %s): %d batches/epoch x %d epochs",
            n_pairs,
            stats.num_truncated,
            stats.dropped or "none",
            state.n_batches,
            self.num_epochs,
        )
        return metrics


@dataclass(frozen=True, kw_only=True)
class ComputeReferenceLogprobs(SourceToInto):
    """The reference's per-target logprobs of every datum in `source` (full sequences scored with
    compute_logprobs, submitted together), aligned with each datum's weights, into `into`."""

    source: str = "batch"
    into: str = "reference_logprobs"
    name: str = "compute_reference_logprobs"
    phase: ClassVar[str] = "reference"
    needs: ClassVar[frozenset[str]] = frozenset({"reference_client"})

    async def __call__(self, ctx: Context[Any]) -> Metrics | None:
        data = getattr(ctx.state, self.source)
        if not data:
            return None
        setattr(ctx.state, self.into, await score_full_sequences(ctx.state.reference_client, data))
        return None


@dataclass(frozen=True, kw_only=True)
class DPOLoss:
    """The DPO loss of `SubmitTrainStep`: forward_backward_custom on the batch as GetBatch delivers
    it (whole pairs, interleaved) against the reference logprobs of the same datums; reports
    tinker-cookbook's DPO keys (pairs, tokens, and the loss function's own metrics: loss,
    accuracy, margin, rewards). Its output carries the reference logprobs beside the policy's,
    for the pairs transcript."""

    beta: float
    reads: ClassVar[frozenset[str]] = frozenset({"reference_logprobs"})
    progress_after_step: ClassVar[bool] = False

    def submit(
        self, client: Any, batch: list[types.Datum], state: Any
    ) -> APIFuture[types.ForwardBackwardOutput]:
        reference_D = state.reference_logprobs
        fb = gather(client.forward_backward_custom(batch, make_dpo_loss_fn(reference_D, self.beta)))
        return fb.map(lambda results: with_reference(results[0], reference_D))

    def metrics(
        self, data: list[types.Datum], fb: types.ForwardBackwardOutput, tokenizer: Any
    ) -> Metrics:
        return {
            "num_pairs": len(data) // PAIR,
            "num_tokens": sum(d.model_input.length for d in data),
            **fb.metrics,
        }
