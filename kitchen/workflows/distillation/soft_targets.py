"""Top-K soft-target stages: the teacher's top-K targets put on fixed datums (off-policy
distillation), and the loss of the shared train step on them. The datums' math is
train_core.distillation.topk's."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from tinker import types

from kitchen.engine.futures import APIFuture
from kitchen.engine.stage import Context, Metrics


@dataclass(frozen=True, kw_only=True)
class TeacherTopKTargets:
    """The datums in state field `field` replaced by the same datums with teacher `teacher`'s
    renormalized top-`topk` next tokens as their targets (positions of weight 0 stay 0)."""

    field: str
    topk: int = 20
    teacher: int = 0
    phase: ClassVar[str] = "reference"  # a teacher's forward, timed like a reference's

    @property
    def name(self) -> str:
        return f"teacher_topk_{self.field}"

    @property
    def reads(self) -> frozenset[str]:
        return frozenset({self.field, "teachers"})

    @property
    def writes(self) -> frozenset[str]:
        return frozenset({self.field})

    async def __call__(self, ctx: Context[Any]) -> Metrics | None:
        from train_core.distillation.topk import sequence_topk_datums

        data = getattr(ctx.state, self.field)
        if not data:
            return None
        client = ctx.state.teachers[self.teacher].client
        soft = await sequence_topk_datums(data, [client] * len(data), self.topk)
        setattr(ctx.state, self.field, soft)
        return None


@dataclass(frozen=True)
class SoftCrossEntropyLoss:
    """The loss of `SubmitTrainStep` on soft-target datums: forward_backward(cross_entropy) with
    [N, K] targets; reports the batch's teacher-student cross-entropy (`train_teacher_ce`)."""

    reads: ClassVar[frozenset[str]] = frozenset()
    progress_after_step: ClassVar[bool] = True

    def submit(
        self, client: Any, batch: list[types.Datum], state: Any
    ) -> APIFuture[types.ForwardBackwardOutput]:
        return client.forward_backward(batch, "cross_entropy")

    def metrics(
        self, data: list[types.Datum], fb: types.ForwardBackwardOutput, tokenizer: Any
    ) -> Metrics:
        from train_core.distillation.soft_ce import soft_cross_entropy
        from train_core.scoring import forward_logprobs

        weights = [d.loss_fn_inputs["weights"].to_numpy() for d in data]
        return {
            "num_sequences": len(data),
            "num_tokens": sum(d.model_input.length for d in data),
            "num_loss_tokens": float(sum(int((w.sum(axis=-1) > 0).sum()) for w in weights)),
            "train_teacher_ce": soft_cross_entropy(forward_logprobs(fb), data),
        }
