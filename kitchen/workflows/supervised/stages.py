"""Supervised stages: render conversations to datums, batch them, and run pipelined train steps."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from tinker import types

from kitchen.engine.errors import DataError
from kitchen.engine.futures import gather
from kitchen.engine.stage import Context, Metrics


@dataclass(frozen=True)
class TokenizeConversations:
    """Render each conversation with the renderer into a cross-entropy datum (truncated to
    max_length); batches per epoch drop the last partial batch, as tinker-cookbook does."""

    batch_size: int
    max_length: int | None
    train_on_what: str | None = "all_assistant_messages"
    num_epochs: int = 1
    with_test: bool = True
    name: str = "tokenize_conversations"
    writes: frozenset[str] = frozenset({"train_data", "test_data", "n_batches", "total_steps"})

    @property
    def reads(self) -> frozenset[str]:
        return frozenset(
            {"conversations", "renderer"} | ({"test_conversations"} if self.with_test else set())
        )

    def _datums(self, items: list[dict[str, Any]], renderer: Any) -> list[types.Datum]:
        from train_core.supervised import conversation_to_datum

        return [
            conversation_to_datum(item["messages"], renderer, self.max_length, self.train_on_what)
            for item in items
        ]

    def __call__(self, ctx: Context[Any]) -> Metrics | None:
        state = ctx.state
        train = self._datums(state.conversations, state.renderer)
        if len(train) < self.batch_size:
            raise DataError(
                f"dataset has {len(train)} examples, fewer than batch_size {self.batch_size}"
            )
        state.train_data = train
        test = state.test_conversations if self.with_test else None
        state.test_data = self._datums(test, state.renderer) if test else None
        state.n_batches = len(train) // self.batch_size
        state.total_steps = state.n_batches * self.num_epochs
        ctx.logger.info(
            "%d train datums, %d batches/epoch x %d epochs",
            len(train),
            state.n_batches,
            self.num_epochs,
        )
        return None


def epoch_order(seed: int, epoch: int, n: int) -> list[int]:
    """The order of n examples in an epoch: a pure function of (seed, epoch), so a resumed run
    sees the batches the interrupted one would have."""
    return np.random.default_rng([seed, epoch]).permutation(n).tolist()


@dataclass(frozen=True)
class ShuffleEpoch:
    """A fresh permutation per epoch, a pure function of (seed, epoch): resume sees the same order."""

    seed: int = 0
    name: str = "shuffle_epoch"
    reads: frozenset[str] = frozenset({"train_data", "epoch_idx"})
    writes: frozenset[str] = frozenset({"order"})

    def __call__(self, ctx: Context[Any]) -> Metrics | None:
        ctx.state.order = epoch_order(self.seed, ctx.state.epoch_idx, len(ctx.state.train_data))
        return None


@dataclass(frozen=True)
class GetBatch:
    batch_size: int
    name: str = "get_batch"
    reads: frozenset[str] = frozenset({"train_data", "order", "batch_idx"})
    writes: frozenset[str] = frozenset({"batch"})

    def __call__(self, ctx: Context[Any]) -> Metrics | None:
        start = ctx.state.batch_idx * self.batch_size
        ids = ctx.state.order[start : start + self.batch_size]
        ctx.state.batch = [ctx.state.train_data[i] for i in ids]
        return None


@dataclass
class SubmittedStep:
    """What a train step needs for its metrics once its futures resolve."""

    step: int
    epoch: int
    learning_rate: float
    batch: list[types.Datum]
    eval_metrics: dict[str, float]
    fb: types.ForwardBackwardOutput | None = None
    optim: types.OptimStepResponse | None = None


@dataclass(frozen=True)
class AdamSettings:
    beta1: float = 0.9
    beta2: float = 0.95
    eps: float = 1e-8
    weight_decay: float = 0.0
    grad_clip_norm: float = 0.0


@dataclass(frozen=True)
class SubmitTrainStep:
    """Submit forward_backward(cross_entropy) and optim_step for the batch without waiting; the
    step's outcome joins `step_queue` so the next batch can be submitted before this one is awaited."""

    learning_rate: float
    lr_schedule: str = "linear"
    warmup_steps: int = 0
    adam: AdamSettings = field(default_factory=AdamSettings)
    name: str = "submit_train_step"
    reads: frozenset[str] = frozenset(
        {"training_client", "batch", "total_steps", "eval_metrics", "step_queue", "epoch_idx"}
    )
    writes: frozenset[str] = frozenset({"step_queue", "eval_metrics"})

    def __call__(self, ctx: Context[Any]) -> Metrics | None:
        from train_core.schedules import lr_at

        state = ctx.state
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
        fb = state.training_client.forward_backward(state.batch, "cross_entropy")
        optim = state.training_client.optim_step(adam)
        submitted = SubmittedStep(
            state.step, state.epoch_idx, lr, state.batch, dict(state.eval_metrics)
        )

        def finish(results: tuple[Any, ...]) -> SubmittedStep:
            submitted.fb, submitted.optim = results
            return submitted

        state.step_queue = [*state.step_queue, gather(fb, optim).map(finish)]
        state.eval_metrics = {}
        return None


@dataclass(frozen=True)
class LogTrainStep:
    """Metrics of the step just awaited, with tinker-cookbook's keys, reported under its own step."""

    name: str = "log_train_step"
    reads: frozenset[str] = frozenset({"step_result", "tokenizer", "total_steps"})
    writes: frozenset[str] = frozenset()

    def __call__(self, ctx: Context[Any]) -> Metrics | None:
        from train_core.supervised import compute_bpb, compute_mean_nll

        done: SubmittedStep | None = ctx.state.step_result
        if done is None or done.fb is None:
            return None
        logprobs = [out["logprobs"] for out in done.fb.loss_fn_outputs]
        weights = [d.loss_fn_inputs["weights"] for d in done.batch]
        targets = [d.loss_fn_inputs["target_tokens"] for d in done.batch]
        metrics: Metrics = {
            "step": done.step,
            "epoch": done.epoch,
            "progress": (done.step + 1) / max(ctx.state.total_steps or 1, 1),
            "learning_rate": done.learning_rate,
            "num_sequences": len(done.batch),
            "num_tokens": sum(d.model_input.length for d in done.batch),
            "num_loss_tokens": float(sum(np.sum(w.to_numpy() > 0) for w in weights)),
            "train_mean_nll": compute_mean_nll(logprobs, weights),
            "train_mean_bpb": compute_bpb(logprobs, weights, targets, ctx.state.tokenizer),
            **(done.optim.metrics or {} if done.optim else {}),
            **done.eval_metrics,
        }
        return metrics


@dataclass(frozen=True)
class EvaluateNLL:
    """NLL and bits-per-byte on the held-out datums. Submitted before the step's forward_backward, it
    sees pre-step weights. `report=True` (at the end of a run) returns the metrics and keeps them in
    `eval_results` instead of handing them to the next train step."""

    prefix: str = "test"
    report: bool = False
    name: str = "evaluate_nll"

    @property
    def reads(self) -> frozenset[str]:
        return frozenset(
            {"training_client", "test_data", "tokenizer"}
            | ({"eval_results"} if self.report else set())
        )

    @property
    def writes(self) -> frozenset[str]:
        return frozenset({"eval_results"} if self.report else {"eval_metrics"})

    async def __call__(self, ctx: Context[Any]) -> Metrics | None:
        from train_core.supervised.evaluator import evaluate_nll_async

        if not ctx.state.test_data:
            return None
        metrics = await evaluate_nll_async(
            ctx.state.training_client, ctx.state.test_data, self.prefix, ctx.state.tokenizer
        )
        if self.report:
            ctx.state.eval_results = {**ctx.state.eval_results, **metrics}
            return {"step": ctx.state.step, **metrics}
        ctx.state.eval_metrics = metrics
        return None
