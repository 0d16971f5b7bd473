"""The shape of a SampleRequest's extras (kitchen.ports.SamplingClient), checked alike by every
sampler that takes them (the local engine's, the fake's): the top-k and draw counts, and
`target_prompt_logprobs`, the ids whose prompt logprobs a request asks for, as an int64
[len(prompt) - 1, K] tensor (row i scores prompt position i + 1; -1 asks for nothing), dense or
sparse CSR, with the answer in the same shape and layout (0.0 where nothing was asked). Facts of
the request, not of an engine: no adapter owns them."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

import numpy as np
from tinker import types

from kitchen.engine.errors import BackendError
from kitchen.ports import SampleRequest

WHERE = "sample: target_prompt_logprobs"
# SamplingClient.sample's options that are Kitchen's, not the SDK's (kitchen.ports).
KITCHEN = ("record_stability_info", "sequence_ids", "on_token")


def check_counts(request: SampleRequest) -> None:
    """The request's top-k and draw counts (topk_prompt_logprobs, topk_sample_logprobs,
    prompt_alt_tokens_k) are 0 or more; every sampler that takes the extras checks them alike."""
    for name in ("topk_prompt_logprobs", "topk_sample_logprobs", "prompt_alt_tokens_k"):
        k = getattr(request, name)
        if k < 0:
            raise BackendError(f"sample: {name} is {k}; expected 0 or more")


def sdk_arguments(request: SampleRequest) -> dict[str, Any]:
    """The request's fields that the SDK's SamplingClient.sample takes, by its names."""
    return {f.name: getattr(request, f.name) for f in fields(request) if f.name not in KITCHEN}


def refuse_options(request: SampleRequest, sampler: str, *names: str) -> None:
    """BackendError when `request` sets one of `names`, options `sampler` does not take."""
    for name in names:
        if getattr(request, name) not in (None, False, 0):
            raise BackendError(f"sample: {sampler} does not take {name}")


def target_ids(asked: types.TensorData, prompt_length: int, vocab_size: int) -> np.ndarray:
    """The asked ids as a dense int64 [prompt_length - 1, K] array, -1 where none is asked;
    BackendError naming what is wrong with the tensor."""
    if asked.dtype != "int64":
        raise BackendError(f"{WHERE}: dtype is {asked.dtype}; expected int64 token ids")
    shape = asked.shape
    if shape is None or len(shape) != 2:
        raise BackendError(f"{WHERE}: shape is {shape}; expected [len(prompt) - 1, K]")
    if shape[0] != prompt_length - 1:
        raise BackendError(
            f"{WHERE}: {shape[0]} rows for a prompt of {prompt_length} tokens; "
            f"expected {prompt_length - 1} (row i scores prompt position i + 1)"
        )
    crow, col = asked.sparse_crow_indices, asked.sparse_col_indices
    if (crow is None) != (col is None):
        raise BackendError(f"{WHERE}: sparse_crow_indices and sparse_col_indices go together")
    if crow is not None and col is not None:
        if len(crow) != shape[0] + 1 or len(col) != len(asked.data) or crow[-1] != len(col):
            raise BackendError(
                f"{WHERE}: the CSR layout does not fit shape {shape} "
                f"({len(crow)} row pointers, {len(col)} columns, {len(asked.data)} values)"
            )
        if col and not 0 <= min(col) <= max(col) < shape[1]:
            raise BackendError(f"{WHERE}: a column index is outside 0..{shape[1] - 1}")
    try:
        ids_RK = np.asarray(asked.to_numpy(pad_value=-1), dtype=np.int64).reshape(shape)
    except (ValueError, RuntimeError) as e:  # torch's CSR invariants, a data/shape mismatch
        raise BackendError(f"{WHERE}: {e}") from None
    bad = (ids_RK < -1) | (ids_RK >= vocab_size)
    if bad.any():
        r, k = (int(x) for x in np.argwhere(bad)[0])
        raise BackendError(
            f"{WHERE}[{r}, {k}] is {ids_RK[r, k]}; expected a token id below {vocab_size} or -1"
        )
    return ids_RK


def target_answer(asked: types.TensorData, logprobs_RK: np.ndarray) -> types.TensorData:
    """`logprobs_RK` (float32, dense) in the layout of the request `asked`: its CSR cells when it
    was sparse, else dense."""
    crow, col = asked.sparse_crow_indices, asked.sparse_col_indices
    if crow is None or col is None:
        return types.TensorData.from_numpy(np.ascontiguousarray(logprobs_RK, dtype=np.float32))
    counts = np.diff(np.asarray(crow, dtype=np.int64)).astype(np.int64)
    rows = np.repeat(np.arange(len(crow) - 1), counts)
    values = logprobs_RK[rows, np.asarray(col, dtype=np.int64)].astype(np.float32)
    return types.TensorData(
        data=values,
        dtype="float32",
        shape=list(logprobs_RK.shape),
        sparse_crow_indices=list(crow),
        sparse_col_indices=list(col),
    )
