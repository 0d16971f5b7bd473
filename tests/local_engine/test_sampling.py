"""Sampling: seeds, stop strings and tokens, max_tokens, logprobs consistent with compute_logprobs."""

from __future__ import annotations

import concurrent.futures
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tinker import types

from kitchen.engine.errors import BackendError
from tests.helpers import engine_device, local_backend

from .conftest import TEXTS, TINY, sft_datum

PROMPT = types.ModelInput.from_ints([5, 17, 42, 99, 7, 300, 12])


@pytest.fixture(scope="module")
def sampler(backend: Any) -> Any:
    return backend.create_sampling_client(base_model=TINY)


def _sample(sampler: Any, n: int = 1, **params: Any) -> types.SampleResponse:
    return sampler.sample(PROMPT, n, types.SamplingParams(**params)).result()


def test_same_seed_same_samples_other_seed_other_samples(sampler: Any) -> None:
    first = _sample(sampler, 3, max_tokens=12, seed=42, stop=[])
    again = _sample(sampler, 3, max_tokens=12, seed=42, stop=[])
    other = _sample(sampler, 3, max_tokens=12, seed=43, stop=[])
    assert [s.tokens for s in first.sequences] == [s.tokens for s in again.sequences]
    assert [s.tokens for s in first.sequences] != [s.tokens for s in other.sequences]
    assert len({tuple(s.tokens) for s in first.sequences}) > 1  # samples of one request differ
    assert len({s.sequence_id for s in first.sequences + again.sequences}) == 6


def test_max_tokens_bounds_every_sample(sampler: Any) -> None:
    response = _sample(sampler, 4, max_tokens=9, seed=0, stop=[])
    assert [len(s.tokens) for s in response.sequences] == [9, 9, 9, 9]
    assert {s.stop_reason for s in response.sequences} == {"length"}


def test_stop_token_ends_the_sample_and_is_kept(sampler: Any) -> None:
    free = _sample(sampler, max_tokens=20, seed=5, stop=[]).sequences[0].tokens
    stop_id = free[6]
    first = free.index(stop_id)
    stopped = _sample(sampler, max_tokens=20, seed=5, stop=[stop_id]).sequences[0]
    assert stopped.tokens == free[: first + 1]
    assert stopped.stop_reason == "stop"


def test_stop_string_ends_the_sample_at_its_first_occurrence(sampler: Any) -> None:
    tokenizer = sampler.get_tokenizer()
    free = _sample(sampler, max_tokens=24, seed=9, stop=[]).sequences[0].tokens
    stop_text = tokenizer.decode(free[5:7])
    stopped = _sample(sampler, max_tokens=24, seed=9, stop=[stop_text]).sequences[0]
    text = tokenizer.decode(stopped.tokens)
    assert stopped.stop_reason == "stop"
    assert stop_text in text and stop_text not in tokenizer.decode(stopped.tokens[:-1])
    assert stopped.tokens == free[: len(stopped.tokens)]


def _tempered_logprobs(sampler: Any, tokens: list[int], start: int, temperature: float) -> Any:
    """log_softmax(logits / T) of tokens[start:], from one plain forward pass of the model."""
    import torch

    ids = torch.tensor([tokens], device=engine_device())
    with torch.inference_mode():
        logits = sampler.host.base(input_ids=ids).logits[0].float()
    lsm = torch.log_softmax(logits[:-1] / temperature, dim=-1)
    return lsm.gather(-1, ids[0, 1:, None]).squeeze(-1)[start - 1 :].cpu().numpy()


@pytest.mark.parametrize("temperature", [0.5, 1.0, 1.5])
def test_sampled_logprobs_are_tempered_as_the_service_returns_them(
    sampler: Any, temperature: float
) -> None:
    response = _sample(sampler, 4, max_tokens=12, seed=3, stop=[], temperature=temperature)
    n = PROMPT.length
    for seq in response.sequences:
        full = PROMPT.to_ints() + seq.tokens
        expected = _tempered_logprobs(sampler, full, n, temperature)
        np.testing.assert_allclose(seq.logprobs, expected, atol=1e-4)
        if temperature == 1.0:  # at T = 1 they are the model's own logprobs
            np.testing.assert_allclose(
                seq.logprobs,
                sampler.compute_logprobs(types.ModelInput.from_ints(full)).result()[n:],
                atol=1e-4,
            )


@pytest.mark.parametrize(
    ("params", "reason"),
    [
        ({"temperature": -1.0}, "temperature is -1.0"),
        ({"top_p": 0.0}, "top_p is 0.0"),
        ({"top_k": 0}, "top_k is 0"),
        ({"max_tokens": -2}, "max_tokens is -2"),
    ],
)
def test_impossible_sampling_params_fail_with_the_reason(
    sampler: Any, params: dict[str, Any], reason: str
) -> None:
    with pytest.raises(BackendError, match=reason):
        _sample(sampler, **params)


def test_token_ids_outside_the_vocabulary_and_overlong_prompts_fail_with_the_reason(
    sampler: Any,
) -> None:
    vocab = sampler.host.vocab_size
    bad = types.ModelInput.from_ints([5, vocab + 3])
    with pytest.raises(BackendError, match=f"token id {vocab + 3} is outside the vocabulary"):
        sampler.sample(bad, 1, types.SamplingParams(max_tokens=2)).result()
    with pytest.raises(BackendError, match="outside the vocabulary"):
        sampler.compute_logprobs(bad).result()
    long = types.ModelInput.from_ints([5] * sampler.host.max_context)
    with pytest.raises(BackendError, match="takes at most"):
        sampler.sample(long, 1, types.SamplingParams(max_tokens=2)).result()
    longer = types.ModelInput.from_ints([5] * (sampler.host.max_context + 1))
    with pytest.raises(BackendError, match="takes at most"):
        sampler.sample(longer, 1, types.SamplingParams(max_tokens=1), True).result()


def test_a_prompt_filling_the_context_is_scored_when_only_its_logprobs_are_asked_for(
    sampler: Any,
) -> None:
    # The SDK's compute_logprobs: a 1-token sample with prompt logprobs (on-policy distillation's
    # teacher scores students' answers that ran to the end of the context).
    tokens = ([5, 17, 42, 99, 7, 300, 12] * 1000)[: sampler.host.max_context]
    full = types.ModelInput.from_ints(tokens)
    response = sampler.sample(full, 1, types.SamplingParams(max_tokens=1), True).result()
    assert list(response.sequences[0].tokens) == []
    scored = response.prompt_logprobs
    assert scored is not None and len(scored) == len(tokens) and scored[0] is None
    expected = sampler.compute_logprobs(full).result()
    np.testing.assert_allclose(scored[1:], expected[1:], atol=1e-4)


def test_a_cancelled_request_leaves_the_decode_batch_and_others_finish(sampler: Any) -> None:
    long = sampler.sample(PROMPT, 8, types.SamplingParams(max_tokens=400, seed=1, stop=[]))
    assert long.cancel()
    short = _sample(sampler, 1, max_tokens=3, seed=2, stop=[])
    assert len(short.sequences[0].tokens) == 3
    with pytest.raises(concurrent.futures.CancelledError):
        long.result(timeout=10)


def test_prompt_logprobs_match_compute_logprobs(sampler: Any) -> None:
    response = sampler.sample(
        PROMPT, 1, types.SamplingParams(max_tokens=2, seed=0), include_prompt_logprobs=True
    ).result()
    expected = sampler.compute_logprobs(PROMPT).result()
    assert response.prompt_logprobs[0] is None
    np.testing.assert_allclose(response.prompt_logprobs[1:], expected[1:], atol=1e-5)
    last_two = sampler.compute_logprobs(PROMPT, prompt_logprobs_last_n=2).result()
    assert last_two == [None] * (PROMPT.length - 2) + expected[-2:]


def test_top_k_one_tiny_top_p_and_zero_temperature_are_greedy(sampler: Any) -> None:
    greedy = _sample(sampler, 2, max_tokens=8, temperature=0.0, stop=[])
    top1 = _sample(sampler, 2, max_tokens=8, top_k=1, seed=1, stop=[])
    nucleus = _sample(sampler, 2, max_tokens=8, top_p=1e-6, seed=2, stop=[])
    tokens = {tuple(s.tokens) for s in greedy.sequences + top1.sequences + nucleus.sequences}
    assert len(tokens) == 1


def test_trained_snapshot_samples_from_the_trained_weights(backend: Any, sampler: Any) -> None:
    client = backend.create_lora_training_client(TINY, rank=8)
    datum = sft_datum(client.get_tokenizer(), TEXTS[0])
    for _ in range(10):
        client.forward_backward([datum], "cross_entropy")
        client.optim_step(types.AdamParams(learning_rate=1e-2))
    snapshot = client.save_weights_and_get_sampling_client()
    saved = client.create_sampling_client(client.save_weights_for_sampler("snap").result().path)
    prompt = types.ModelInput.from_ints(datum.model_input.to_ints())
    trained = snapshot.compute_logprobs(prompt).result()
    assert saved.compute_logprobs(prompt).result() == pytest.approx(trained, abs=1e-6)
    assert sum(trained[1:]) > sum(sampler.compute_logprobs(prompt).result()[1:]) + 1.0
    client.forward_backward([datum], "cross_entropy")  # later training...
    client.optim_step(types.AdamParams(learning_rate=1e-2)).result()
    assert snapshot.compute_logprobs(prompt).result() == trained  # ...never reaches a snapshot
    assert (
        client.save_weights_and_get_sampling_client().compute_logprobs(prompt).result() != trained
    )


def test_snapshot_can_be_awaited_from_an_event_loop(backend: Any) -> None:
    import asyncio

    client = backend.create_lora_training_client(TINY, rank=4)

    async def snapshot_and_sample() -> types.SampleResponse:
        sampler = await client.save_weights_and_get_sampling_client_async()
        return await sampler.sample(PROMPT, 2, types.SamplingParams(max_tokens=3, seed=0, stop=[]))

    response = asyncio.run(snapshot_and_sample())
    assert [len(s.tokens) for s in response.sequences] == [3, 3]


def test_drawn_tokens_follow_the_distribution_and_never_take_a_zero(monkeypatch: Any) -> None:
    import torch

    from kitchen.adapters.local.sample.sampling import draw_tokens
    from kitchen.adapters.local.sample.seed_stream import SeedStream

    probs_V = torch.tensor([0.5, 0.0, 0.3, 0.2, 0.0], device=engine_device())
    stream = SeedStream(0, engine_device())

    def u(n: int) -> torch.Tensor:
        return stream.uniform((n, 1), engine_device())

    drawn = torch.cat([draw_tokens(probs_V.expand(1000, -1), u(1000)) for _ in range(20)])
    counts = torch.bincount(drawn, minlength=5).double() / len(drawn)
    sigma = (probs_V.double() * (1 - probs_V.double()) / len(drawn)).sqrt()
    assert counts[1] == 0 and counts[4] == 0
    assert ((counts - probs_V.double()).abs() <= 5 * sigma + 1e-12).all(), counts
    stream = SeedStream(0, engine_device())
    again = draw_tokens(probs_V.expand(1000, -1), u(1000))
    assert torch.equal(again, drawn[:1000])  # a request's seed fixes its tokens
    # u * total rounding up to the total takes the last token that has probability, not the end.
    monkeypatch.setattr(
        torch, "rand", lambda shape, **kw: torch.ones(shape, dtype=kw["dtype"], device=kw["device"])
    )
    assert draw_tokens(probs_V[None], u(1)).tolist() == [3]


def test_the_base_model_samples_after_its_last_lora_client_closes(tmp_path: Path) -> None:
    with local_backend(tmp_path) as engine:
        sampler = engine.create_sampling_client(base_model=TINY)
        params = types.SamplingParams(max_tokens=4, seed=1, stop=[])
        before = sampler.sample(PROMPT, 2, params).result()
        engine.create_lora_training_client(TINY, rank=4).close()  # its adapter is deleted
        after = sampler.sample(PROMPT, 2, params).result()
    assert [s.tokens for s in after.sequences] == [s.tokens for s in before.sequences]
    for a, b in zip(after.sequences, before.sequences, strict=True):
        np.testing.assert_allclose(a.logprobs, b.logprobs, atol=1e-6)


def test_every_bit_of_a_64_bit_seed_picks_the_stream() -> None:
    import torch

    from kitchen.adapters.local.sample.seed_stream import SeedStream

    def first_draws(seed: int) -> list[float]:
        return SeedStream(seed, "cpu").uniform((8,), "cpu").tolist()  # type: ignore[no-any-return]

    # torch's CPU generator alone reads only the low 32 bits: the defect this guards against.
    low = torch.Generator(device="cpu").manual_seed(0)
    high = torch.Generator(device="cpu").manual_seed(2**40)
    assert torch.equal(
        torch.rand(4, generator=low, device="cpu"), torch.rand(4, generator=high, device="cpu")
    )
    a, b = 12345, 678
    seeds = [0, 1, 2**32, 2**40, 2**63, 2**64 - 1, a + (b << 32), b + (a << 32)]
    draws = [first_draws(s) for s in seeds]
    assert len({tuple(d) for d in draws}) == len(seeds)
    assert all(0 <= u < 1 for d in draws for u in d)
    assert first_draws(2**40) == first_draws(2**40)
    # Seeds below 2**32 draw what they drew before; -1 is torch's 2**64 - 1.
    assert (
        first_draws(7)
        == torch.rand(
            8,
            generator=torch.Generator(device="cpu").manual_seed(7),
            dtype=torch.float64,
            device="cpu",
        ).tolist()
    )
    assert first_draws(-1) == first_draws(2**64 - 1)


def test_a_seed_past_64_bits_fails_its_request_with_the_range(sampler: Any) -> None:
    future = sampler.sample(PROMPT, 1, types.SamplingParams(max_tokens=2, seed=2**64))
    with pytest.raises(BackendError, match=r"seed is 18446744073709551616; expected a 64-bit"):
        future.result()
