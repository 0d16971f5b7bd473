"""Preference (DPO) stages: comparisons -> datum pairs, a frozen reference, reference logprobs per
batch, the DPO forward_backward_custom, the optimizer step, metrics and a held-out evaluator.

A batch is interleaved [chosen_0, rejected_0, chosen_1, ...] as tinker-cookbook's DPO batches are.
The math (pairing, truncation, the loss and its metrics) is in `train_core.preference`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from tinker import types

from kitchen.engine.errors import DataError, StageError
from kitchen.engine.futures import gather
from kitchen.engine.stage import Context, Metrics
from kitchen.workflows.supervised.stages import AdamSettings, epoch_order
from train_core.preference import (
    Comparison,
    LabeledComparison,
    Overflow,
    build_dpo_data,
    interleave_pairs,
    make_dpo_loss_fn,
    preference_metrics,
    split_pairs,
)
from train_core.supervised import (
    compute_mean_nll,
    forward_logprobs,
    full_sequence_from_datum,
    logprobs_aligned_to_targets,
)


def labeled_comparison(row: dict[str, Any]) -> LabeledComparison:
    """A comparison row (cookbook/datasets/comparison.py's shape) -> train_core's type."""
    comparison = Comparison(row["prompt_conversation"], row["completion_A"], row["completion_B"])
    return LabeledComparison(comparison, row["label"])


@dataclass(frozen=True)
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
        n_pairs = len(train) // 2
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


@dataclass(frozen=True)
class ShufflePairs:
    """A fresh permutation of pair indices per epoch, a pure function of (seed, epoch): a resumed
    run sees the same order. Pairs move together, so chosen and rejected stay side by side."""

    seed: int = 0
    name: str = "shuffle_pairs"
    reads: frozenset[str] = frozenset({"n_pairs", "epoch_idx"})
    writes: frozenset[str] = frozenset({"order"})

    def __call__(self, ctx: Context[Any]) -> Metrics | None:
        ctx.state.order = epoch_order(self.seed, ctx.state.epoch_idx, ctx.state.n_pairs)
        return None


@dataclass(frozen=True)
class GetPreferenceBatch:
    """This step's `batch_size` pairs as interleaved datums [chosen, rejected, ...]."""

    batch_size: int
    name: str = "get_preference_batch"
    reads: frozenset[str] = frozenset({"train_data", "order", "batch_idx"})
    writes: frozenset[str] = frozenset({"batch"})

    def __call__(self, ctx: Context[Any]) -> Metrics | None:
        start = ctx.state.batch_idx * self.batch_size
        data = ctx.state.train_data
        pair_ids = ctx.state.order[start : start + self.batch_size]
        ctx.state.batch = [d for i in pair_ids for d in (data[2 * i], data[2 * i + 1])]
        return None


@dataclass(frozen=True)
class InitReference:
    """The frozen reference the DPO log-ratios are taken against.

    `base_model` (reference_model_name, else the policy's base): the base weights with adapters
    off; a fresh LoRA starts equal to them. With `initial_state_path` (the policy started from a
    checkpoint) the reference is those weights: a snapshot before the first step, or, on resume,
    a snapshot of a client loaded from that checkpoint (the live one has trained since).
    """

    base_model: str
    initial_state_path: str | None = None
    name: str = "init_reference"
    reads: frozenset[str] = frozenset({"training_client"})
    writes: frozenset[str] = frozenset({"reference_client"})
    ports: frozenset[str] = frozenset({"backend"})

    def __call__(self, ctx: Context[Any]) -> Metrics | None:
        backend = ctx.require_backend()
        if self.initial_state_path is None:
            reference = backend.create_sampling_client(base_model=self.base_model)
            ctx.logger.info("reference: %s (adapters off)", self.base_model)
        elif ctx.resume is None:
            reference = ctx.state.training_client.save_weights_and_get_sampling_client()
            ctx.logger.info("reference: the initial weights from %s", self.initial_state_path)
        else:
            initial = backend.create_training_client_from_state(self.initial_state_path)
            reference = initial.save_weights_and_get_sampling_client()
        ctx.state.reference_client = reference
        return None


@dataclass(frozen=True)
class ComputeReferenceLogprobs:
    """The reference's per-target logprobs of every datum in `source` (full sequences scored with
    compute_logprobs, submitted together), aligned with each datum's weights, into `into`."""

    source: str = "batch"
    into: str = "reference_logprobs"
    name: str = "compute_reference_logprobs"

    @property
    def reads(self) -> frozenset[str]:
        return frozenset({"reference_client", self.source})

    @property
    def writes(self) -> frozenset[str]:
        return frozenset({self.into})

    async def __call__(self, ctx: Context[Any]) -> Metrics | None:
        data = getattr(ctx.state, self.source)
        if not data:
            return None
        reference = ctx.state.reference_client
        futures = [reference.compute_logprobs(full_sequence_from_datum(d)) for d in data]
        rows = await gather(*futures)
        setattr(ctx.state, self.into, [logprobs_aligned_to_targets(r) for r in rows])
        return None


@dataclass
class SubmittedDPOStep:
    """What a DPO step needs for its metrics once its futures resolve."""

    step: int
    epoch: int
    data: list[types.Datum]
    eval_metrics: dict[str, float]
    learning_rate: float | None = None
    fb: types.ForwardBackwardOutput | None = None
    optim: types.OptimStepResponse | None = None


@dataclass(frozen=True)
class DPOForwardBackward:
    """Submit forward_backward_custom with the DPO loss against this batch's reference logprobs;
    the step joins `step_queue` (OptimStep completes it). An unpaired trailing datum is dropped."""

    beta: float
    name: str = "dpo_forward_backward"
    reads: frozenset[str] = frozenset(
        {
            "training_client",
            "batch",
            "reference_logprobs",
            "eval_metrics",
            "step_queue",
            "epoch_idx",
        }
    )
    writes: frozenset[str] = frozenset({"step_queue", "eval_metrics"})

    def __call__(self, ctx: Context[Any]) -> Metrics | None:
        state = ctx.state
        chosen, rejected = split_pairs(state.batch)
        data = interleave_pairs(chosen, rejected)
        reference = state.reference_logprobs[: len(data)]
        loss_fn = make_dpo_loss_fn(reference[0::2], reference[1::2], self.beta)
        fb = state.training_client.forward_backward_custom(data, loss_fn)
        submitted = SubmittedDPOStep(state.step, state.epoch_idx, data, dict(state.eval_metrics))
        state.step_queue = [*state.step_queue, fb.map(lambda out: replace(submitted, fb=out))]
        state.eval_metrics = {}
        return None


@dataclass(frozen=True)
class OptimStep:
    """Submit optim_step at this step's scheduled learning rate; it completes the newest submitted
    step in `step_queue` (whose gradients it applies)."""

    learning_rate: float
    lr_schedule: str = "linear"
    warmup_steps: int = 0
    adam: AdamSettings = field(default_factory=AdamSettings)
    name: str = "optim_step"
    reads: frozenset[str] = frozenset({"training_client", "total_steps", "step_queue"})
    writes: frozenset[str] = frozenset({"step_queue"})

    def __call__(self, ctx: Context[Any]) -> Metrics | None:
        from train_core.schedules import lr_at

        state = ctx.state
        if not state.step_queue:
            raise StageError("optim_step: no forward_backward was submitted before it this step")
        lr = lr_at(
            state.step, state.total_steps, self.learning_rate, self.lr_schedule, self.warmup_steps
        )
        adam = types.AdamParams(
            learning_rate=lr,
            beta1=self.adam.beta1,
            beta2=self.adam.beta2,
            eps=self.adam.eps,
            weight_decay=self.adam.weight_decay,
            grad_clip_norm=self.adam.grad_clip_norm,
        )
        optim = state.training_client.optim_step(adam)

        def finish(results: tuple[Any, ...]) -> SubmittedDPOStep:
            return replace(results[0], learning_rate=lr, optim=results[1])

        state.step_queue = [*state.step_queue[:-1], gather(state.step_queue[-1], optim).map(finish)]
        return None


@dataclass(frozen=True)
class LogDPOStep:
    """Metrics of the step just awaited, with tinker-cookbook's keys, under its own step."""

    name: str = "log_dpo_step"
    reads: frozenset[str] = frozenset({"step_result", "total_steps"})
    writes: frozenset[str] = frozenset()

    def __call__(self, ctx: Context[Any]) -> Metrics | None:
        done: SubmittedDPOStep | None = ctx.state.step_result
        if done is None or done.fb is None:
            return None
        return {
            "step": done.step,
            "epoch": done.epoch,
            "progress": done.step / max(ctx.state.total_steps or 1, 1),
            "learning_rate": done.learning_rate,
            "num_pairs": len(done.data) // 2,
            "num_tokens": sum(d.model_input.length for d in done.data),
            **done.fb.metrics,
            **(done.optim.metrics or {} if done.optim else {}),
            **done.eval_metrics,
        }


@dataclass(frozen=True)
class EvaluatePreference:
    """Held-out pairwise accuracy, DPO loss, margin and rewards, NLL of the chosen responses and of
    all responses (`{prefix}/nll`, 0.6.1's evaluator key), from one forward of the policy.
    Inside the loop it runs before the step's forward_backward (pre-step weights) and hands its
    metrics to that step; `report=True` (the end of a run) returns them and keeps them in
    `eval_results` (what the model registry records)."""

    beta: float
    prefix: str = "test"
    report: bool = False
    name: str = "evaluate_preference"

    @property
    def reads(self) -> frozenset[str]:
        inputs = {"training_client", "test_data", "test_reference_logprobs"}
        return frozenset(inputs | ({"eval_results"} if self.report else set()))

    @property
    def writes(self) -> frozenset[str]:
        return frozenset({"eval_results"} if self.report else {"eval_metrics"})

    async def __call__(self, ctx: Context[Any]) -> Metrics | None:
        data = ctx.state.test_data
        if not data:
            return None
        output = await ctx.state.training_client.forward(list(data), "cross_entropy")
        logprobs_D = forward_logprobs(output)
        metrics = preference_metrics(
            logprobs_D, ctx.state.test_reference_logprobs, data, self.beta, self.prefix
        )
        weights_D = [d.loss_fn_inputs["weights"] for d in data]
        metrics[f"{self.prefix}/nll"] = compute_mean_nll(logprobs_D, weights_D)
        if self.report:
            ctx.state.eval_results = {**ctx.state.eval_results, **metrics}
            return {"step": ctx.state.step, **metrics}
        ctx.state.eval_metrics = metrics
        return None
