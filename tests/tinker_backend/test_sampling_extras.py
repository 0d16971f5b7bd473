"""The official SDK's target_prompt_logprobs, topk_sample_logprobs and prompt_alt_tokens_k
against `kitchen serve`, each equal to one forward pass of tiny-llama in this process."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tinker
import torch
from tinker import types

from tests.helpers import engine_device, local_backend

from .conftest import TINY

PROMPT = [5, 17, 42, 99, 7, 300, 12, 64]


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """tiny-llama loaded here, apart from the server, in the dtype the server computes in (bf16 from --dtype
    auto): the direct computation."""
    with local_backend(tmp_path_factory.mktemp("direct"), dtype="bfloat16") as backend:
        yield backend.create_sampling_client(base_model=TINY)


@pytest.fixture
def sampler(sdk_env: str) -> Iterator[Any]:
    service = tinker.ServiceClient()
    yield service.create_sampling_client(base_model=TINY).result()
    service.close("success").result()


def _log_softmax(model: Any, tokens: list[int], temperature: float = 1.0) -> np.ndarray:
    ids = torch.tensor([tokens], device=engine_device())
    with model.weights() as forward, torch.inference_mode():  # the engine's compute dtype
        logits = forward(input_ids=ids).logits[0].float()
    return torch.log_softmax(logits / temperature, dim=-1).cpu().numpy()


@pytest.mark.parametrize("sparse", [False, True])
def test_target_prompt_logprobs_through_the_sdk_equal_a_forward_pass(
    sampler: Any, model: Any, sparse: bool, tmp_path: Path
) -> None:
    cells = {(0, 1): 3, (2, 0): 250, (6, 0): 99, (6, 1): 12, (6, 2): 0}
    ids = torch.full((len(PROMPT) - 1, 3), -1, dtype=torch.int64)
    for (r, c), token in cells.items():
        ids[r, c] = token
    asked = (
        types.TensorData.from_torch_sparse(ids, pad_value=-1)
        if sparse
        else (types.TensorData.from_torch(ids))
    )
    out = sampler.sample(
        types.ModelInput.from_ints(PROMPT),
        1,
        types.SamplingParams(max_tokens=1, seed=0),
        target_prompt_logprobs=asked,
    ).result()
    got = out.target_prompt_logprobs
    assert got is not None and got.shape == [len(PROMPT) - 1, 3]
    assert (got.sparse_crow_indices is not None) == sparse
    lsm = _log_softmax(model, PROMPT)
    expected = np.zeros((len(PROMPT) - 1, 3), dtype=np.float32)
    for (r, c), token in cells.items():
        expected[r, c] = lsm[r, token]
    np.testing.assert_allclose(got.to_numpy(), expected, atol=1e-5)


def test_topk_sample_logprobs_through_the_sdk_equal_a_forward_pass(
    sampler: Any, model: Any
) -> None:
    params = types.SamplingParams(max_tokens=5, seed=9, stop=[], temperature=0.8)
    out = sampler.sample(
        types.ModelInput.from_ints(PROMPT), 2, params, topk_sample_logprobs=3
    ).result()
    for seq in out.sequences:
        lsm = _log_softmax(model, PROMPT + seq.tokens, 0.8)
        assert seq.topk_logprobs is not None and len(seq.topk_logprobs) == len(seq.tokens)
        for t, row in enumerate(seq.topk_logprobs):
            scores = lsm[len(PROMPT) - 1 + t]
            top = np.argsort(-scores)[:3]
            assert row is not None and [tok for tok, _ in row] == top.tolist()
            np.testing.assert_allclose([lp for _, lp in row], scores[top], atol=1e-5)


def test_prompt_alt_tokens_through_the_sdk_carry_the_forward_pass_logprobs(
    sampler: Any, model: Any
) -> None:
    out = sampler.sample(
        types.ModelInput.from_ints(PROMPT),
        1,
        types.SamplingParams(max_tokens=1, seed=2),
        prompt_alt_tokens_k=4,
    ).result()
    alt = out.prompt_alt_tokens
    assert alt is not None
    tokens, logprobs = alt.tokens.to_numpy(), alt.logprobs.to_numpy()
    assert tokens.shape == (len(PROMPT) - 1, 4)
    lsm = _log_softmax(model, PROMPT)[:-1]
    np.testing.assert_allclose(logprobs, np.take_along_axis(lsm, tokens, axis=1), atol=1e-5)
