"""Preference learning math: comparison types, datum pairs, the DPO loss, preference evaluation,
preference models (judges), tournaments and win rate."""

from train_core.preference.dpo import (
    DPOOutput,
    dpo_loss,
    dpo_losses,
    dpo_output,
    make_dpo_loss_fn,
    pair_logratios,
    weighted_logprob_sums,
)
from train_core.preference.evaluator import (
    PreferenceEvaluator,
    evaluate_preference_async,
    preference_metrics,
)
from train_core.preference.judge_accuracy import JudgeAccuracyEvaluator, judge_accuracy_metrics
from train_core.preference.pairs import (
    PAIR,
    DatumPair,
    DropReason,
    Overflow,
    PairStats,
    build_dpo_data,
    chosen_rejected,
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
    "PAIR",
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
    "chosen_rejected",
    "comparison_score",
    "dpo_loss",
    "dpo_losses",
    "dpo_output",
    "evaluate_preference_async",
    "get_pairs",
    "get_pairs_chunked",
    "judge_accuracy_metrics",
    "judge_conversation",
    "make_dpo_loss_fn",
    "pair_logratios",
    "pairwise_group_rewards",
    "preference_metrics",
    "weighted_logprob_sums",
    "win_rate_stats",
]
