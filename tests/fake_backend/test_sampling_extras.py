"""The fake backend's sampling extras (target_prompt_logprobs, topk_prompt_logprobs,
topk_sample_logprobs, prompt_alt_tokens_k): the local engine's shapes and layouts, read from one
normalised distribution that agrees with the fake's prompt and sample logprobs; and the sampling
port names the extras every sampling client takes."""

from __future__ import annotations

import inspect
import math

import numpy as np
import pytest
import torch
from tinker import types

from kitchen.adapters.fake import FakeBackend
from kitchen.adapters.fake.distribution import rest_logprob
from kitchen.engine.errors import BackendError
from kitchen.ports import SamplingClient

PROMPT = [72, 101, 108, 108, 111, 33]  # "Hello!"
THETA = -2.0  # the fake's logprob before any optim step


def _sampler() -> tuple[FakeBackend, object]:
    fake = FakeBackend()
    return fake, fake.create_sampling_client(None)


def _sample(sampler: object, temperature: float = 1.0, seed: int | None = 3, **extras: object):
    params = types.SamplingParams(max_tokens=4, temperature=temperature, seed=seed)
    prompt = types.ModelInput.from_ints(PROMPT)
    return sampler.sample(prompt, 2, params, **extras).result()  # type: ignore[attr-defined]


def test_every_prompt_row_is_a_distribution_whose_next_token_has_the_prompt_logprob() -> None:
    fake, sampler = _sampler()
    vocab = fake.tokenizer.vocab_size
    every_id = np.tile(np.arange(vocab, dtype=np.int64), (len(PROMPT) - 1, 1))
    answer = _sample(
        sampler,
        include_prompt_logprobs=True,
        target_prompt_logprobs=types.TensorData.from_numpy(every_id),
    )
    lp_RV = answer.target_prompt_logprobs.to_numpy()
    assert lp_RV.dtype == np.float32 and lp_RV.shape == (len(PROMPT) - 1, vocab)
    np.testing.assert_allclose(np.logaddexp.reduce(lp_RV.astype(np.float64), axis=-1), 0, atol=1e-5)
    # The asked next token's logprob is the one include_prompt_logprobs reports.
    next_lp = lp_RV[np.arange(len(PROMPT) - 1), PROMPT[1:]]
    np.testing.assert_allclose(next_lp, answer.prompt_logprobs[1:], rtol=1e-6)
    assert answer.prompt_logprobs[0] is None


def test_target_logprobs_answer_dense_and_sparse_requests_in_their_layout() -> None:
    fake, sampler = _sampler()
    rest = rest_logprob(THETA, fake.tokenizer.vocab_size)
    ids_RK = torch.full((len(PROMPT) - 1, 3), -1, dtype=torch.int64)
    ids_RK[2] = torch.tensor([PROMPT[3], 7, -1])
    ids_RK[4, 1] = PROMPT[5]
    dense = _sample(sampler, target_prompt_logprobs=types.TensorData.from_torch(ids_RK))
    sparse = _sample(
        sampler, target_prompt_logprobs=types.TensorData.from_torch_sparse(ids_RK, pad_value=-1)
    )
    expected = np.zeros((len(PROMPT) - 1, 3), np.float32)
    expected[2, :2] = [THETA, rest]
    expected[4, 1] = THETA
    np.testing.assert_allclose(dense.target_prompt_logprobs.to_numpy(), expected, rtol=1e-6)
    answer = sparse.target_prompt_logprobs
    assert answer.sparse_crow_indices is not None and len(answer.data) == 3
    np.testing.assert_allclose(answer.to_numpy(), expected, rtol=1e-6)


def test_a_bad_target_request_fails_its_future_naming_the_rows() -> None:
    _, sampler = _sampler()
    ids = types.TensorData.from_numpy(np.zeros((2, 1), np.int64))
    with pytest.raises(BackendError, match="2 rows for a prompt of 6 tokens"):
        _sample(sampler, target_prompt_logprobs=ids)
    with pytest.raises(BackendError, match="prompt_alt_tokens_k is -1"):
        _sample(sampler, prompt_alt_tokens_k=-1)


def test_topk_prompt_and_sample_logprobs_lead_with_the_next_token() -> None:
    fake, sampler = _sampler()
    rest = rest_logprob(THETA, fake.tokenizer.vocab_size)
    answer = _sample(sampler, topk_prompt_logprobs=3, topk_sample_logprobs=2)
    rows = answer.topk_prompt_logprobs
    assert len(rows) == len(PROMPT) and rows[0] is None
    for row, token in zip(rows[1:], PROMPT[1:], strict=True):
        others = [i for i in range(3) if i != token][:2]  # ties go to the lower id
        assert [t for t, _ in row] == [token, *others]
        assert [lp for _, lp in row] == pytest.approx([THETA, rest, rest])
    for seq in answer.sequences:
        assert len(seq.topk_logprobs) == len(seq.tokens)
        for row, token, lp in zip(seq.topk_logprobs, seq.tokens, seq.logprobs, strict=True):
            assert len(row) == 2 and row[0] == (token, pytest.approx(lp))
    plain = _sample(sampler)
    assert plain.topk_prompt_logprobs is None and plain.sequences[0].topk_logprobs is None


def test_alt_tokens_are_seeded_draws_at_the_requests_temperature() -> None:
    fake, sampler = _sampler()
    vocab = fake.tokenizer.vocab_size
    alt = _sample(sampler, prompt_alt_tokens_k=5).prompt_alt_tokens
    tokens, logprobs = alt.tokens.to_numpy(), alt.logprobs.to_numpy()
    assert tokens.dtype == np.int64 and tokens.shape == (len(PROMPT) - 1, 5)
    assert logprobs.dtype == np.float32 and logprobs.shape == tokens.shape
    is_next = tokens == np.asarray(PROMPT[1:])[:, None]
    np.testing.assert_allclose(
        logprobs, np.where(is_next, THETA, rest_logprob(THETA, vocab)), rtol=1e-6
    )
    again = _sample(sampler, prompt_alt_tokens_k=5).prompt_alt_tokens
    np.testing.assert_array_equal(again.tokens.to_numpy(), tokens)  # same seed, same draws
    other = _sample(sampler, seed=4, prompt_alt_tokens_k=5).prompt_alt_tokens
    assert not np.array_equal(other.tokens.to_numpy(), tokens)
    greedy = _sample(sampler, temperature=0.0, prompt_alt_tokens_k=2).prompt_alt_tokens
    np.testing.assert_array_equal(greedy.tokens.to_numpy(), np.repeat([PROMPT[1:]], 2, 0).T)


def test_alt_tokens_follow_the_distribution_they_are_drawn_from() -> None:
    """At temperature T the next token's probability is e^(theta/T) / Z; the draws' frequency
    of it agrees within 5 standard deviations."""
    fake, sampler = _sampler()
    vocab = fake.tokenizer.vocab_size
    k = 2000
    for temperature in (1.0, 0.5):
        alt = _sample(sampler, temperature=temperature, prompt_alt_tokens_k=k).prompt_alt_tokens
        hits = (alt.tokens.to_numpy() == np.asarray(PROMPT[1:])[:, None]).sum()
        a, b = THETA / temperature, rest_logprob(THETA, vocab) / temperature
        p = math.exp(a) / (math.exp(a) + (vocab - 1) * math.exp(b))
        n = k * (len(PROMPT) - 1)
        assert abs(hits - n * p) < 5 * math.sqrt(n * p * (1 - p))
        row_0 = alt.tokens.to_numpy()[0] == PROMPT[1]
        np.testing.assert_allclose(alt.logprobs.to_numpy()[0][row_0], math.log(p), rtol=1e-5)


def test_the_port_names_the_extras_every_sampling_client_takes() -> None:
    from tinker.lib.public_interfaces.sampling_client import SamplingClient as SdkClient

    from kitchen.adapters.fake.backend import FakeSamplingClient
    from kitchen.adapters.local.clients.sampling_client import LocalSamplingClient

    port = inspect.signature(SamplingClient.sample).parameters
    for extra in ("topk_sample_logprobs", "target_prompt_logprobs", "prompt_alt_tokens_k"):
        assert port[extra].kind is inspect.Parameter.KEYWORD_ONLY
        for client in (FakeSamplingClient, LocalSamplingClient, SdkClient):
            theirs = inspect.signature(client.sample).parameters
            assert extra in theirs and theirs[extra].default == port[extra].default, client


@pytest.mark.parametrize("option", ["record_stability_info", "sequence_ids", "on_token"])
def test_a_sampler_fails_a_request_for_an_option_it_lacks(option: str) -> None:
    """Every sampler has the port's whole signature; the fake keeps no stability records, names
    no samples and streams nothing, so a request that sets one of those fails its future."""
    from kitchen.serve.openai.generate import streams_tokens

    _, sampler = _sampler()
    value = {"record_stability_info": True, "sequence_ids": ["a", "b"], "on_token": print}[option]
    with pytest.raises(BackendError, match=f"does not take {option}"):
        _sample(sampler, **{option: value})
    assert not streams_tokens(sampler)
