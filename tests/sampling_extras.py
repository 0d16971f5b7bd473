"""What the sampling-extras tests ask and expect, in-process (tests/local_engine) and through the
SDK against kitchen serve (tests/tinker_backend): a target_prompt_logprobs request and its answer
from a forward pass's log_softmax, and the top-k rows a sequence must carry."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from tinker import types

Cells = dict[tuple[int, int], int]  # (prompt row, column) -> the token asked there


def asked_targets(rows: int, cells: Cells, k: int, sparse: bool) -> types.TensorData:
    """The [rows, k] target tokens `cells` (-1 elsewhere), dense or sparse."""
    ids = torch.full((rows, k), -1, dtype=torch.int64, device="cpu")
    for (r, c), token in cells.items():
        ids[r, c] = token
    return (
        types.TensorData.from_torch_sparse(ids, pad_value=-1)
        if sparse
        else (types.TensorData.from_torch(ids))
    )


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
