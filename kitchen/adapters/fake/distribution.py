"""The fake model's next-token distribution, and the SDK's sampling extras read from it.

The fake's rule (backend.py) gives the token that comes next (the prompt's next token, or the one
the responder chose) logprob theta; read as a distribution over the vocabulary, the other V - 1
ids share the rest of the mass evenly. The extras are what the local engine computes from its
logits, computed from this distribution in the same shapes and layouts:
- `topk_prompt_logprobs`: the top k at every prompt position after the first (None first);
- `target_prompt_logprobs`: the asked ids' logprobs, int64 [P - 1, K] asked, float32 answered in
  the request's layout, 0.0 where -1 asked nothing;
- `prompt_alt_tokens_k`: k draws with replacement at every prompt position after the first, at
  the request's temperature (<= 0: the argmax), with their logprobs at that temperature;
- `topk_sample_logprobs`: the top k at every sampled position. The fake's samples are the
  responder's whatever the temperature, and their logprobs theta, so these are at temperature 1
  too: the sampled token's entry is its reported logprob.
Ties (every id but the next one) go to the lower id, as a stable sort gives.
"""

from __future__ import annotations

import math

import numpy as np
from tinker import types

from kitchen.engine.errors import BackendError
from kitchen.ports.sample_request import target_answer, target_ids


def rest_logprob(theta: float, vocab_size: int) -> float:
    """The logprob of each id that is not the next one: (1 - e^theta) / (V - 1)."""
    return math.log(-math.expm1(theta) / (vocab_size - 1))


def logprobs_RV(next_R: list[int], theta: float, vocab_size: int) -> np.ndarray:
    """float64 [R, V]: row r is the distribution whose next token is `next_R[r]`."""
    bad = [t for t in next_R if not 0 <= t < vocab_size]
    if bad:
        raise BackendError(
            f"fake backend: token id {bad[0]} is outside the vocabulary of {vocab_size}"
        )
    out = np.full((len(next_R), vocab_size), rest_logprob(theta, vocab_size))
    out[np.arange(len(next_R)), np.asarray(next_R, dtype=np.int64)] = theta
    return out


def topk_rows(lsm_RV: np.ndarray, k: int) -> list[list[tuple[int, float]] | None]:
    """The k most likely (id, logprob) of every row, most likely first."""
    order_RK = np.argsort(-lsm_RV, axis=-1, kind="stable")[:, : min(k, lsm_RV.shape[-1])]
    values_RK = np.take_along_axis(lsm_RV, order_RK, axis=-1)
    return [
        list(zip(ids, values, strict=True))
        for ids, values in zip(order_RK.tolist(), values_RK.tolist(), strict=True)
    ]


def prompt_targets(
    asked: types.TensorData, prompt: list[int], theta: float, vocab_size: int
) -> types.TensorData:
    """The answer to `target_prompt_logprobs=asked` (checked as the local engine checks it)."""
    ids_RK = target_ids(asked, len(prompt), vocab_size)
    lsm_RV = logprobs_RV(prompt[1:], theta, vocab_size)
    picked_RK = np.take_along_axis(lsm_RV, np.where(ids_RK >= 0, ids_RK, 0), axis=-1)
    return target_answer(asked, np.where(ids_RK >= 0, picked_RK, 0.0).astype(np.float32))


def alt_draws(
    prompt: list[int], theta: float, vocab_size: int, k: int, temperature: float, key: list[int]
) -> types.PromptAltTokens:
    """k draws at every prompt position after the first, from a generator seeded by `key`."""
    lsm_RV = logprobs_RV(prompt[1:], theta, vocab_size)
    rows = lsm_RV.shape[0]
    if temperature <= 0:
        tokens_RK = np.repeat(lsm_RV.argmax(axis=-1)[:, None], k, axis=1)
    else:
        scaled_RV = lsm_RV / temperature
        lsm_RV = scaled_RV - np.logaddexp.reduce(scaled_RV, axis=-1, keepdims=True)
        cdf_RV = np.cumsum(np.exp(lsm_RV), axis=-1)
        u_RK = np.random.default_rng(key).random((rows, k)) * cdf_RV[:, -1:]
        # Inverting each row's CDF: the first id whose cumulative mass passes u.
        tokens_RK = (cdf_RV[:, None, :] <= u_RK[:, :, None]).sum(axis=-1)
        tokens_RK = np.minimum(tokens_RK, vocab_size - 1)
    logprobs_RK = np.take_along_axis(lsm_RV, tokens_RK, axis=-1)
    return types.PromptAltTokens(
        tokens=types.TensorData.from_numpy(tokens_RK.astype(np.int64)),
        logprobs=types.TensorData.from_numpy(logprobs_RK.astype(np.float32)),
    )
