"""The teacher-student cross-entropy of top-K soft-target datums: per position with a target,
-sum_k w_k log p_student(x_k), averaged over those positions (w: the teacher's renormalized top-K
probabilities). Lower is closer to the teacher; its floor is the teacher's own top-K entropy."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from tinker import types

from train_core.evaluation.evaluator import EvaluatorClient
from train_core.scoring import ForwardClient, forward_target_logprobs


def soft_cross_entropy(logprobs_D: Sequence[Any], data_D: Sequence[types.Datum]) -> float:
    """Mean over positions with any weight of -sum_k w_k lp_k; `logprobs_D[i]` is datum i's
    [N, K] student logprobs of its [N, K] targets. NaN when no position has a target."""
    total, positions = 0.0, 0
    for lp, datum in zip(logprobs_D, data_D, strict=True):
        w_NK = datum.loss_fn_inputs["weights"].to_numpy()
        lp_NK = np.asarray(lp, dtype=np.float64).reshape(w_NK.shape)
        total += float(-(w_NK * lp_NK).sum())
        positions += int((w_NK.sum(axis=-1) > 0).sum())
    return total / positions if positions else float("nan")


@dataclass(frozen=True, kw_only=True)
class SoftCrossEntropyEvaluator:
    """An Evaluator: `{prefix}/teacher_ce` of the held-out soft-target datums under the training
    client's current weights (one cross_entropy forward)."""

    prefix: str = "test"
    name: ClassVar[str] = "teacher_ce"
    client: ClassVar[EvaluatorClient] = "training"
    inputs: ClassVar[tuple[str, ...]] = ("test_data",)

    async def __call__(
        self, client: ForwardClient, /, *, test_data: Sequence[types.Datum] | None
    ) -> dict[str, float]:
        if not test_data:
            return {}
        logprobs_D = await forward_target_logprobs(client, test_data)
        return {f"{self.prefix}/teacher_ce": soft_cross_entropy(logprobs_D, test_data)}
