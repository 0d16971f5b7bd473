"""Negative log-likelihood and bits-per-byte, as tinker-cookbook 0.6.1 reports them."""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from train_core.arrays import as_array

logger = logging.getLogger(__name__)


def compute_mean_nll(logprobs_list: Sequence[Any], weights_list: Sequence[Any]) -> float:
    """Weighted mean NLL over a batch: -sum(logprobs * weights) / sum(weights); nan if no weight."""
    if len(logprobs_list) != len(weights_list):
        raise ValueError(
            f"nll: {len(logprobs_list)} logprob rows but {len(weights_list)} weight rows"
        )
    weighted_logprob_sum = 0.0
    weight_sum = 0.0
    for row, (logprobs, weights) in enumerate(zip(logprobs_list, weights_list, strict=True)):
        logprobs_T, weights_T = as_array(logprobs), as_array(weights)
        if logprobs_T.shape != weights_T.shape:
            raise ValueError(
                f"nll: row {row} has {logprobs_T.size} logprobs but {weights_T.size} weights"
            )
        weighted_logprob_sum += float(logprobs_T @ weights_T)
        weight_sum += float(weights_T.sum())
    if weight_sum == 0:
        logger.warning("nll: no token has weight; mean NLL is nan")
        return float("nan")
    return -weighted_logprob_sum / weight_sum


def bits_per_byte(nll_sum_nats: float, num_bytes: int) -> float:
    """Total NLL in nats over a span -> bits per UTF-8 byte of that span; nan for zero bytes."""
    if num_bytes <= 0:
        return float("nan")
    return nll_sum_nats / (math.log(2) * num_bytes)


def _special_ids(tokenizer: Any) -> frozenset[int]:
    ids = getattr(tokenizer, "all_special_ids", None) or []
    return frozenset(int(i) for i in ids if i is not None)


def _decoded_bytes(token_ids: list[int], tokenizer: Any) -> int:
    text = tokenizer.decode(token_ids, skip_special_tokens=False)
    if isinstance(text, list):
        text = "".join(text)
    return len(text.encode("utf-8"))


def counted_nll_and_bytes(
    logprobs: Any, weights: Any, target_tokens: Any, tokenizer: Any
) -> tuple[float, int]:
    """NLL (nats) and UTF-8 bytes of one datum's trained, non-special target tokens.

    A token counts when its weight is > 0 (a mask, so mean-reduced weights still give total nats)
    and it is not a special token; contiguous runs of counted tokens are decoded separately so a
    gap never merges unrelated text (0.6.1's rule).
    """
    logprobs_T, weights_T = as_array(logprobs), as_array(weights)
    token_ids = [int(t) for t in as_array(target_tokens)]
    special = _special_ids(tokenizer)
    is_special = getattr(tokenizer, "is_special_token", None)
    counted_T = np.array(
        [
            w > 0 and t not in special and not (callable(is_special) and bool(is_special(t)))
            for w, t in zip(weights_T, token_ids, strict=True)
        ],
        dtype=bool,
    )
    nll = float(-logprobs_T[counted_T].sum()) if counted_T.any() else 0.0
    num_bytes = 0
    run: list[int] = []
    for token_id, counted in zip(token_ids, counted_T, strict=True):
        if counted:
            run.append(token_id)
        elif run:
            num_bytes += _decoded_bytes(run, tokenizer)
            run = []
    if run:
        num_bytes += _decoded_bytes(run, tokenizer)
    return nll, num_bytes


def compute_bpb(
    logprobs_list: Sequence[Any],
    weights_list: Sequence[Any],
    target_tokens_list: Sequence[Any],
    tokenizer: Any,
) -> float:
    """Bits per byte over a batch: a tokenizer-independent NLL (0.6.1's compute_bpb)."""
    total_nll, total_bytes = 0.0, 0
    for logprobs, weights, targets in zip(
        logprobs_list, weights_list, target_tokens_list, strict=True
    ):
        nll, num_bytes = counted_nll_and_bytes(logprobs, weights, targets, tokenizer)
        total_nll += nll
        total_bytes += num_bytes
    if total_bytes == 0:
        logger.warning("bpb: no counted target bytes; bits-per-byte is nan")
    return bits_per_byte(total_nll, total_bytes)
