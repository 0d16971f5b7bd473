"""Supervised learning math: conversation -> Datum, mean NLL, bits-per-byte, an NLL evaluator."""

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
    "nll_metrics",
    "shift_chunks",
]
