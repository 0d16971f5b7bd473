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
from tests.sampling_extras import assert_top_k_rows, expected_targets, sample_asking_targets

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
    out = sample_asking_targets(sampler, PROMPT, cells, 3, sparse)
    got = out.target_prompt_logprobs
    assert got is not None and got.shape == [len(PROMPT) - 1, 3]
    assert (got.sparse_crow_indices is not None) == sparse
    expected = expected_targets(_log_softmax(model, PROMPT), len(PROMPT) - 1, cells, 3)
    np.testing.assert_allclose(got.to_numpy(), expected, atol=1e-5)


def test_topk_sample_logprobs_through_the_sdk_equal_a_forward_pass(
    sampler: Any, model: Any
) -> None:
    params = types.SamplingParams(max_tokens=5, seed=9, stop=[], temperature=0.8)
    out = sampler.sample(
        types.ModelInput.from_ints(PROMPT), 2, params, topk_sample_logprobs=3
    ).result()
    for seq in out.sequences:
        assert_top_k_rows(seq, _log_softmax(model, PROMPT + seq.tokens, 0.8), len(PROMPT), 3)


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
