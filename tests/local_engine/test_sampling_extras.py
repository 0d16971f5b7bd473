"""The SDK's prompt and sample extras in the local engine: target_prompt_logprobs,
topk_sample_logprobs and prompt_alt_tokens_k, each against one plain forward pass of the model."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from tinker import types

from tests.helpers import engine_device
from tests.sampling_extras import assert_top_k_rows, expected_targets, sample_asking_targets

from .conftest import TINY

PROMPT = [5, 17, 42, 99, 7, 300, 12]


@pytest.fixture(scope="module")
def sampler(backend: Any) -> Any:
    return backend.create_sampling_client(base_model=TINY)


def _log_softmax(sampler: Any, tokens: list[int], temperature: float = 1.0) -> np.ndarray:
    """log_softmax(logits / T) at every position of one forward pass over `tokens` [L, V]."""
    ids = torch.tensor([tokens], device=engine_device())
    with torch.inference_mode():
        logits = sampler.host.base(input_ids=ids).logits[0].float()
    return torch.log_softmax(logits / temperature, dim=-1).cpu().numpy()


@pytest.mark.parametrize("sparse", [False, True])
def test_target_prompt_logprobs_are_the_forward_pass_log_softmax_at_the_asked_cells(
    sampler: Any, sparse: bool
) -> None:
    cells = {(0, 0): 3, (0, 2): 250, (3, 1): 7, (5, 0): 99, (5, 1): 0}
    out = sample_asking_targets(sampler, PROMPT, cells, 3, sparse)
    got = out.target_prompt_logprobs
    assert got is not None and got.dtype == "float32" and got.shape == [len(PROMPT) - 1, 3]
    assert (got.sparse_crow_indices is not None) == sparse  # the request's layout
    dense = got.to_numpy()
    expected = expected_targets(_log_softmax(sampler, PROMPT), len(PROMPT) - 1, cells, 3)
    np.testing.assert_allclose(dense, expected, atol=1e-5)
    assert out.prompt_logprobs is None and out.prompt_alt_tokens is None


@pytest.mark.parametrize(
    ("make", "reason"),
    [
        (
            lambda: types.TensorData.from_torch(
                torch.zeros((3, 2), dtype=torch.int64, device="cpu")
            ),
            "3 rows",
        ),
        (lambda: types.TensorData.from_torch(torch.full((6, 1), 10**7, device="cpu")), "below"),
        (lambda: types.TensorData.from_torch(torch.zeros((6, 1), device="cpu")), "int64"),
    ],
)
def test_a_bad_target_tensor_fails_its_request_with_the_reason(
    sampler: Any, make: Any, reason: str
) -> None:
    from kitchen.engine.errors import BackendError

    future = sampler.sample(
        types.ModelInput.from_ints(PROMPT),
        1,
        types.SamplingParams(max_tokens=1),
        target_prompt_logprobs=make(),
    )
    with pytest.raises(BackendError, match=reason):
        future.result()


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_topk_sample_logprobs_are_the_top_k_of_the_tempered_log_softmax(
    sampler: Any, temperature: float
) -> None:
    params = types.SamplingParams(max_tokens=6, seed=4, stop=[], temperature=temperature)
    prompt = types.ModelInput.from_ints(PROMPT)
    out = sampler.sample(prompt, 2, params, topk_sample_logprobs=4).result()
    plain = sampler.sample(prompt, 2, params).result()
    for seq, same in zip(out.sequences, plain.sequences, strict=True):
        assert seq.tokens == same.tokens and same.topk_logprobs is None  # unchanged samples
        lsm = _log_softmax(sampler, PROMPT + seq.tokens, temperature)
        assert_top_k_rows(seq, lsm, len(PROMPT), 4)
        for t, row in enumerate(seq.topk_logprobs):
            chosen = dict(row).get(seq.tokens[t])
            if chosen is not None:  # a sampled token among them carries its own logprob
                assert chosen == pytest.approx(seq.logprobs[t], abs=1e-5)


def test_prompt_alt_tokens_are_seeded_draws_with_their_logprobs(sampler: Any) -> None:
    prompt = types.ModelInput.from_ints(PROMPT)
    params = types.SamplingParams(max_tokens=3, seed=11, temperature=1.0)
    out = sampler.sample(prompt, 1, params, prompt_alt_tokens_k=64).result()
    again = sampler.sample(prompt, 1, params, prompt_alt_tokens_k=64).result()
    plain = sampler.sample(prompt, 1, params).result()
    alt = out.prompt_alt_tokens
    assert alt is not None and plain.prompt_alt_tokens is None
    tokens, logprobs = alt.tokens.to_numpy(), alt.logprobs.to_numpy()
    assert tokens.shape == logprobs.shape == (len(PROMPT) - 1, 64)
    assert alt.tokens.dtype == "int64" and alt.logprobs.dtype == "float32"
    np.testing.assert_array_equal(tokens, again.prompt_alt_tokens.tokens.to_numpy())  # seeded
    assert out.sequences[0].tokens == plain.sequences[0].tokens  # the samples' stream is apart
    lsm = _log_softmax(sampler, PROMPT)[:-1]
    np.testing.assert_allclose(logprobs, np.take_along_axis(lsm, tokens, axis=1), atol=1e-5)
    # Draws follow the distribution: tiny-llama's top token at each row comes up about as often
    # as its probability says (64 draws: 4 standard deviations, with the rows pooled).
    top = lsm.argmax(axis=1)
    p = np.exp(lsm.max(axis=1))
    hits = (tokens == top[:, None]).sum()
    mean, sd = 64 * p.sum(), np.sqrt(64 * (p * (1 - p)).sum())
    assert abs(hits - mean) < 4 * sd + 1


def test_greedy_prompt_alt_tokens_are_the_argmax(sampler: Any) -> None:
    out = sampler.sample(
        types.ModelInput.from_ints(PROMPT),
        1,
        types.SamplingParams(max_tokens=1, temperature=0.0),
        prompt_alt_tokens_k=2,
    ).result()
    lsm = _log_softmax(sampler, PROMPT)[:-1]
    tokens = out.prompt_alt_tokens.tokens.to_numpy()
    np.testing.assert_array_equal(tokens, np.repeat(lsm.argmax(axis=1)[:, None], 2, axis=1))
