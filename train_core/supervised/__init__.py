"""Supervised learning math: conversation -> Datum, mean NLL, bits-per-byte, an NLL evaluator."""

from train_core.arrays import as_array
from train_core.scoring import forward_logprobs
from train_core.scoring import (
    full_sequence as full_sequence_from_datum,  # its name before scoring.py
)
from train_core.scoring import target_logprobs as logprobs_aligned_to_targets  # likewise
from train_core.supervised.datum import (
    Reduction,
    SupervisedRenderer,
    conversation_to_datum,
    datum_from_model_input_weights,
    datum_weights,
    shift_chunks,
)
from train_core.supervised.evaluator import (
    NLLEvaluator,
    evaluate_nll,
    evaluate_nll_async,
    evaluate_nll_with_sampler,
    nll_metrics,
)
from train_core.supervised.nll import (
    bits_per_byte,
    compute_bpb,
    compute_mean_nll,
    counted_nll_and_bytes,
)

__all__ = [
    "NLLEvaluator",
    "Reduction",
    "SupervisedRenderer",
    "as_array",
    "bits_per_byte",
    "compute_bpb",
    "compute_mean_nll",
    "conversation_to_datum",
    "counted_nll_and_bytes",
    "datum_from_model_input_weights",
    "datum_weights",
    "evaluate_nll",
    "evaluate_nll_async",
    "evaluate_nll_with_sampler",
    "forward_logprobs",
    "full_sequence_from_datum",
    "logprobs_aligned_to_targets",
    "nll_metrics",
    "shift_chunks",
]
