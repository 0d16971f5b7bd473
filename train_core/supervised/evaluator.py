"""Held-out NLL (and bits-per-byte) of a set of cross-entropy datums, keys as 0.6.1's evaluators.

Two ways to get the logprobs, same math after: a training client's `forward(data, "cross_entropy")`
(0.6.1's NLLEvaluator; sees the current, pre-step weights) or a sampling client's
`compute_logprobs` on each full sequence (0.6.1's SamplerNLLEvaluator).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from tinker import types

from train_core.evaluation.evaluator import EvaluatorClient
from train_core.scoring import (
    ForwardClient,
    LogprobClient,
    forward_target_logprobs,
    score_full_sequences,
)
from train_core.supervised.nll import compute_bpb, compute_mean_nll


def nll_metrics(
    logprobs_list: Sequence[Any],
    data: Sequence[types.Datum],
    name: str = "test",
    tokenizer: Any = None,
) -> dict[str, float]:
    """{"{name}/nll"} plus "{name}/bpb" when a tokenizer is given; logprobs align with weights."""
    weights = [datum.loss_fn_inputs["weights"] for datum in data]
    metrics = {f"{name}/nll": compute_mean_nll(logprobs_list, weights)}
    if tokenizer is not None and data and "target_tokens" in data[0].loss_fn_inputs:
        targets = [datum.loss_fn_inputs["target_tokens"] for datum in data]
        metrics[f"{name}/bpb"] = compute_bpb(logprobs_list, weights, targets, tokenizer)
    return metrics


def evaluate_nll(
    training_client: ForwardClient,
    data: Sequence[types.Datum],
    name: str = "test",
    tokenizer: Any = None,
) -> dict[str, float]:
    """Blocking: evaluate_nll_async run to completion (outside any running event loop)."""
    return asyncio.run(evaluate_nll_async(training_client, data, name, tokenizer))


async def evaluate_nll_async(
    training_client: ForwardClient,
    data: Sequence[types.Datum],
    name: str = "test",
    tokenizer: Any = None,
) -> dict[str, float]:
    """One forward over all datums, then the NLL metrics."""
    return await _scored_nll(forward_target_logprobs, training_client, data, name, tokenizer)


async def evaluate_nll_with_sampler(
    sampling_client: LogprobClient,
    data: Sequence[types.Datum],
    name: str = "test",
    tokenizer: Any = None,
) -> dict[str, float]:
    """Score each full sequence with compute_logprobs (concurrently), then the NLL metrics."""
    return await _scored_nll(score_full_sequences, sampling_client, data, name, tokenizer)


async def _scored_nll(
    score: Callable[[Any, Sequence[types.Datum]], Awaitable[Sequence[Any]]],
    client: Any,
    data: Sequence[types.Datum],
    name: str,
    tokenizer: Any,
) -> dict[str, float]:
    """The NLL metrics of `data` under `score(client, data)`'s per-datum logprobs; NaN when
    there is nothing to score."""
    if not data:
        return {f"{name}/nll": float("nan")}
    return nll_metrics(await score(client, data), data, name, tokenizer)


@dataclass(frozen=True, kw_only=True)
class NLLEvaluator:
    """An Evaluator: `{prefix}/nll` and `{prefix}/bpb` of the held-out datums under the training
    client's current weights (one cross_entropy forward)."""

    prefix: str = "test"
    name: ClassVar[str] = "nll"
    client: ClassVar[EvaluatorClient] = "training"
    inputs: ClassVar[tuple[str, ...]] = ("test_data", "tokenizer")

    async def __call__(
        self, client: ForwardClient, /, *, test_data: Sequence[types.Datum] | None, tokenizer: Any
    ) -> dict[str, float]:
        if not test_data:
            return {}
        return await evaluate_nll_async(client, test_data, self.prefix, tokenizer)
