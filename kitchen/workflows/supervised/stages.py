"""Supervised stages: render conversations to datums; the cross-entropy loss of the shared train
step (kitchen/workflows/common/train_step.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from tinker import types

from kitchen.engine.errors import DataError
from kitchen.engine.futures import APIFuture
from kitchen.engine.stage import Context, Metrics


@dataclass(frozen=True, kw_only=True)
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


@dataclass(frozen=True)
class CrossEntropyLoss:
    """The SFT loss of `SubmitTrainStep`: forward_backward(cross_entropy) on the batch; reports
    tinker-cookbook's SL keys (sequences, tokens, loss tokens, train NLL and bits per byte)."""

    reads: ClassVar[frozenset[str]] = frozenset()
    progress_after_step: ClassVar[bool] = True

    def submit(
        self, client: Any, batch: list[types.Datum], state: Any
    ) -> APIFuture[types.ForwardBackwardOutput]:
        return client.forward_backward(batch, "cross_entropy")

    def metrics(
        self, data: list[types.Datum], fb: types.ForwardBackwardOutput, tokenizer: Any
    ) -> Metrics:
        from train_core.scoring import forward_logprobs
        from train_core.supervised import compute_bpb, compute_mean_nll

        logprobs = forward_logprobs(fb)
        weights = [d.loss_fn_inputs["weights"] for d in data]
        targets = [d.loss_fn_inputs["target_tokens"] for d in data]
        return {
            "num_sequences": len(data),
            "num_tokens": sum(d.model_input.length for d in data),
            "num_loss_tokens": float(sum(np.sum(w.to_numpy() > 0) for w in weights)),
            "train_mean_nll": compute_mean_nll(logprobs, weights),
            "train_mean_bpb": compute_bpb(logprobs, weights, targets, tokenizer),
        }
