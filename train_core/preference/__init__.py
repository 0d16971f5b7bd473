"""Preference learning math: comparison types, datum pairs, the DPO loss, preference evaluation,
preference models (judges), tournaments and win rate."""

from train_core.preference.dpo import (
    DPOOutput,
    dpo_loss,
    dpo_losses,
    dpo_output,
    make_dpo_loss_fn,
    weighted_logprob_sums,
)
from train_core.preference.evaluator import (
    PreferenceEvaluator,
    evaluate_preference_async,
    pairwise_accuracy,
    preference_metrics,
)
from train_core.preference.judge_accuracy import JudgeAccuracyEvaluator, judge_accuracy_metrics
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
from train_core.preference.preference_model import (
    GenerativePreferenceModel,
    PreferenceModel,
    ShorterIsBetter,
    judge_conversation,
)
from train_core.preference.tournament import (
    TournamentPattern,
    get_pairs,
    get_pairs_chunked,
    pairwise_group_rewards,
)
from train_core.preference.types import Comparison, Label, LabeledComparison
from train_core.preference.win_rate import ComparisonEvaluator, comparison_score, win_rate_stats

__all__ = [
    "Comparison",
    "ComparisonEvaluator",
    "DPOOutput",
    "DatumPair",
    "DropReason",
    "GenerativePreferenceModel",
    "JudgeAccuracyEvaluator",
    "Label",
    "LabeledComparison",
    "Overflow",
    "PairStats",
    "PreferenceEvaluator",
    "PreferenceModel",
    "ShorterIsBetter",
    "TournamentPattern",
    "build_dpo_data",
    "comparison_score",
    "comparison_to_datum_pair",
    "datum_pair_or_drop_reason",
    "dpo_loss",
    "dpo_losses",
    "dpo_output",
    "evaluate_preference_async",
    "get_pairs",
    "get_pairs_chunked",
    "interleave_pairs",
    "judge_accuracy_metrics",
    "judge_conversation",
    "make_dpo_loss_fn",
    "pairwise_accuracy",
    "pairwise_group_rewards",
    "preference_metrics",
    "split_pairs",
    "weighted_logprob_sums",
    "win_rate_stats",
]
