"""What the sampling-extras tests ask and expect, in-process (tests/local_engine) and through the
SDK against kitchen serve (tests/tinker_backend): a sample asking target_prompt_logprobs and the
answer a forward pass's log_softmax gives, and the top-k rows a sequence must carry."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from tinker import types

Cells = dict[tuple[int, int], int]  # (prompt row, column) -> the token asked there


def sample_asking_targets(
    sampler: Any, prompt: list[int], cells: Cells, k: int, sparse: bool
) -> Any:
    """The response to one token sampled after `prompt` (seed 0) that asks target_prompt_logprobs
    of the [len(prompt) - 1, k] target tokens `cells` (-1 elsewhere), sparse or dense."""
    ids = torch.full((len(prompt) - 1, k), -1, dtype=torch.int64, device="cpu")
    for (r, c), token in cells.items():
        ids[r, c] = token
    asked = (
        types.TensorData.from_torch_sparse(ids, pad_value=-1)
        if sparse
        else (types.TensorData.from_torch(ids))
    )
    assert (asked.sparse_crow_indices is not None) == sparse
    return sampler.sample(
        types.ModelInput.from_ints(prompt),
        1,
        types.SamplingParams(max_tokens=1, seed=0),
        target_prompt_logprobs=asked,
    ).result()


def expected_targets(lsm: np.ndarray, rows: int, cells: Cells, k: int) -> np.ndarray:
    """The answer to `asked_targets`: row r scores prompt position r + 1, from the logits at r."""
    expected = np.zeros((rows, k), dtype=np.float32)
    for (r, c), token in cells.items():
        expected[r, c] = lsm[r, token]
    return expected


def assert_top_k_rows(seq: Any, lsm: np.ndarray, prompt_length: int, k: int) -> None:
    """`seq.topk_logprobs` holds, for each sampled token, the k best tokens of its position's
    `lsm` row with their logprobs, best first."""
    assert seq.topk_logprobs is not None and len(seq.topk_logprobs) == len(seq.tokens)
    for t, row in enumerate(seq.topk_logprobs):
        scores = lsm[prompt_length - 1 + t]
        top = np.argsort(-scores)[:k]
        assert row is not None and [tok for tok, _ in row] == top.tolist()
        np.testing.assert_allclose([lp for _, lp in row], scores[top], atol=1e-5)
