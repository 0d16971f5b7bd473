"""A datum's target logprobs from a client, one per target token (float64).

Two routes: a training client's forward / forward_backward returns them per datum
(`forward_logprobs`); a sampling client scores each datum's full sequence (its inputs plus its last
target) with `compute_logprobs` (`score_full_sequences`). The second is the one copy of that loop:
DPO's reference logprobs, the sampler NLL evaluator, the RL KL penalty and post-update KL, and the
distillation teachers in the student's chat format all score through it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, Protocol

from tinker import types

from train_core.arrays import FloatArray, as_array
from train_core.futures import resolve_future


class ForwardClient(Protocol):
    """Anything with the training client's forward (returns a future of ForwardBackwardOutput)."""

    def forward(self, data: list[types.Datum], loss_fn: Any) -> Any: ...


class LogprobClient(Protocol):
    """Anything with the sampling client's compute_logprobs (returns a future of logprobs)."""

    def compute_logprobs(self, prompt: types.ModelInput) -> Any: ...


def forward_logprobs(output: Any) -> list[FloatArray]:
    """Per datum, the target logprobs of a ForwardBackwardOutput (forward or forward_backward)."""
    return [as_array(row["logprobs"]) for row in output.loss_fn_outputs]


async def forward_target_logprobs(
    client: ForwardClient, data_D: Sequence[types.Datum]
) -> list[FloatArray]:
    """Per datum, the training client's logprob of each of its targets: one cross_entropy forward
    over all the datums (in a pipelined loop, the weights before the pending step)."""
    return forward_logprobs(await resolve_future(client.forward(list(data_D), "cross_entropy")))


def num_targets(datum: types.Datum) -> int:
    return len(datum.loss_fn_inputs["target_tokens"].data)


def full_sequence(datum: types.Datum) -> types.ModelInput:
    """The datum's unshifted sequence: its inputs plus its last target (the inputs alone when it
    has no target)."""
    targets = datum.loss_fn_inputs["target_tokens"].data
    if not targets:
        return datum.model_input
    return datum.model_input.append_int(int(targets[-1]))


def target_logprobs(scored: Sequence[float | None], n_targets: int | None = None) -> FloatArray:
    """compute_logprobs of a full sequence (one per position, position 0 unscored) -> logprobs_T,
    one per target of the datum (`n_targets` of them, when given, or it fails saying so)."""
    full = as_array(scored)
    if n_targets is not None and full.size != n_targets + 1:
        raise ValueError(
            f"scored {full.size} positions for a datum with {n_targets} targets; expected "
            f"{n_targets + 1} (its full sequence)"
        )
    return full[1:]


async def score_full_sequences(
    client: LogprobClient, data_D: Sequence[types.Datum]
) -> list[FloatArray]:
    """Per datum, the client's logprob of each of its targets; every request is submitted before
    any is awaited."""
    futures = [client.compute_logprobs(full_sequence(d)) for d in data_D]
    scored_D = await asyncio.gather(*(resolve_future(f) for f in futures))
    return [target_logprobs(s, num_targets(d)) for s, d in zip(scored_D, data_D, strict=True)]
