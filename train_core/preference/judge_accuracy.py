"""Held-out pairwise accuracy of a generative judge: on labelled comparisons, the fraction where
P(A better) > 1/2 exactly when the label is A (ties skipped), with the mean probability and
negative log-likelihood of the labelled side."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from train_core.evaluation.evaluator import ConversationsEvaluator
from train_core.preference.preference_model import GenerativePreferenceModel, PreferenceModel
from train_core.preference.types import Comparison, LabeledComparison


def judge_accuracy_metrics(
    prob_a_N: Sequence[float], labels_N: Sequence[str], prefix: str = "test"
) -> dict[str, float]:
    """Accuracy, mean P(labelled side) and its NLL over N labelled (non-tie) comparisons."""
    prob_a = np.asarray(prob_a_N, dtype=np.float64)
    is_a = np.asarray([label == "A" for label in labels_N])
    if prob_a.size == 0 or prob_a.shape != is_a.shape:
        raise ValueError(f"judge accuracy: {prob_a.size} judgements for {is_a.size} labels")
    p_correct = np.where(is_a, prob_a, 1.0 - prob_a)
    return {
        f"{prefix}/pairwise_accuracy": float(np.mean((prob_a > 0.5) == is_a)),
        f"{prefix}/prob_correct": float(p_correct.mean()),
        f"{prefix}/judge_nll": float(np.mean([-math.log(max(p, 1e-12)) for p in p_correct])),
        f"{prefix}/num_pairs": float(prob_a.size),
    }


def labeled_comparison(row: dict[str, Any]) -> LabeledComparison:
    """A comparison row (prompt_conversation, completion_A, completion_B, label) as the type."""
    comparison = Comparison(row["prompt_conversation"], row["completion_A"], row["completion_B"])
    return LabeledComparison(comparison, row["label"])


async def judge_accuracy(
    judge: PreferenceModel,
    labeled: Sequence[LabeledComparison],
    prefix: str = "test",
    both_orders: bool = False,
) -> dict[str, float]:
    """`judge_accuracy_metrics` of the judge; with `both_orders` also of the judge asked both
    ways (as BothOrders, reusing the first order's judgements), under {prefix}/both_orders/."""
    kept = [lc for lc in labeled if lc.label != "Tie"]
    labels = [lc.label for lc in kept]
    p_ab = await asyncio.gather(*(judge(lc.comparison) for lc in kept))
    metrics = judge_accuracy_metrics(p_ab, labels, prefix)
    if both_orders:
        p_ba = await asyncio.gather(*(judge(lc.comparison.swap()) for lc in kept))
        both = [(ab + 1.0 - ba) / 2.0 for ab, ba in zip(p_ab, p_ba, strict=True)]
        metrics.update(judge_accuracy_metrics(both, labels, f"{prefix}/both_orders"))
    return metrics


@dataclass(frozen=True, kw_only=True)
class JudgeAccuracyEvaluator(ConversationsEvaluator):
    """An Evaluator (sampling client): the generative judge on the current weights, over held-out
    rows that carry their comparison fields (the judge's training rows do); with `both_orders`
    also asked both ways, under {prefix}/both_orders/..."""

    both_orders: bool = True
    name: ClassVar[str] = "judge_accuracy"

    async def evaluate(
        self, client: Any, conversations: Sequence[dict[str, Any]], renderer: Any
    ) -> dict[str, float]:
        judge = GenerativePreferenceModel(client, renderer)
        labeled = [labeled_comparison(r) for r in conversations]
        return await judge_accuracy(judge, labeled, self.prefix, self.both_orders)
