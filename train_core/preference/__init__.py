"""Preference learning math: comparison types, datum pairs, the DPO loss, preference evaluation."""

from train_core.preference.dpo import (
    DPOOutput,
    dpo_loss,
    dpo_loss_grad,
    dpo_losses,
    make_dpo_loss_fn,
    weighted_logprob_sums,
)
from train_core.preference.evaluator import (
    PreferenceEvaluator,
    evaluate_preference_async,
    pairwise_accuracy,
    preference_metrics,
)
from train_core.preference.pairs import (
    DatumPair,
    DropReason,
    Overflow,
    PairStats,
    build_dpo_data,
    comparison_to_datum_pair,
    datum_pair_or_drop_reason,
    interleave_pairs,
    split_pairs,
)
from train_core.preference.types import Comparison, Label, LabeledComparison

__all__ = [
    "Comparison",
    "DPOOutput",
    "DatumPair",
    "DropReason",
    "Label",
    "LabeledComparison",
    "Overflow",
    "PairStats",
    "PreferenceEvaluator",
    "build_dpo_data",
    "comparison_to_datum_pair",
    "datum_pair_or_drop_reason",
    "dpo_loss",
    "dpo_loss_grad",
    "dpo_losses",
    "evaluate_preference_async",
    "interleave_pairs",
    "make_dpo_loss_fn",
    "pairwise_accuracy",
    "preference_metrics",
    "split_pairs",
    "weighted_logprob_sums",
]
