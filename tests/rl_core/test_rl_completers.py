import asyncio
import concurrent.futures
from typing import Any

import numpy as np
import pytest
from rl_core_fakes import STOP, CharRenderer, LatencySampler, encode
from tinker import types

from train_core.completers import (
    GroupedTokenCompleter,
    TinkerMessageCompleter,
    TinkerTokenCompleter,
)


def response(tokens, logprobs=None, stop_reason="stop"):
    seq = types.SampledSequence(
        stop_reason=stop_reason,
        sequence_id="seq-1",
        tokens_np=np.asarray(tokens, dtype=np.int32),
        logprobs_np=None if logprobs is None else np.asarray(logprobs, dtype=np.float32),
    )
    return types.SampleResponse(sequences=[seq], prompt_cache_hit_tokens=3)


class FakeSampler:
    """Returns futures the way the SDK does (awaitable), or plain responses / coroutines."""

    def __init__(self, resp, mode="future"):
        self.resp, self.mode, self.requests = resp, mode, []

    def sample(self, prompt, num_samples, sampling_params):
        self.requests.append((prompt, num_samples, sampling_params))
        if self.mode == "plain":
            return self.resp
        if self.mode == "coroutine":

            async def later():
                return self.resp

            return later()
        fut = concurrent.futures.Future()
        fut.set_result(self.resp)
        return asyncio.wrap_future(fut)


@pytest.mark.parametrize("mode", ["future", "coroutine", "plain"])
def test_token_completer_returns_tokens_logprobs_and_ids(mode):
    sampler = FakeSampler(response([5, 6], [-0.5, -1.0], "length"), mode)
    completer = TinkerTokenCompleter(sampler, max_tokens=16, temperature=0.7)
    out = asyncio.run(completer(types.ModelInput.from_ints([1, 2]), [STOP], max_tokens=4))
    assert out.tokens == [5, 6] and out.logprobs == pytest.approx([-0.5, -1.0])
    assert out.stop_reason == "length" and out.sequence_id == "seq-1"
    assert out.prompt_cache_hit_tokens == 3
    prompt, n, params = sampler.requests[0]
    assert n == 1 and prompt.to_ints() == [1, 2]
    assert (params.max_tokens, params.temperature, params.stop) == (4, 0.7, [STOP])


def test_token_completer_caps_max_tokens_to_the_context_window():
    sampler = FakeSampler(response([5], [-0.1]))
    completer = TinkerTokenCompleter(sampler, max_tokens=16, context_window=10)
    asyncio.run(completer(types.ModelInput.from_ints(list(range(7))), [STOP]))
    assert sampler.requests[0][2].max_tokens == 3
    with pytest.raises(ValueError, match="no room"):
        asyncio.run(completer(types.ModelInput.from_ints(list(range(10))), [STOP]))


def test_token_completer_requires_logprobs():
    completer = TinkerTokenCompleter(FakeSampler(response([5], None)), max_tokens=4)
    with pytest.raises(ValueError, match="logprobs"):
        asyncio.run(completer(types.ModelInput.from_ints([1]), [STOP]))


def test_message_completer_renders_samples_and_parses():
    sampler = FakeSampler(response([*encode("hello"), STOP], [-0.1] * 6))
    completer = TinkerMessageCompleter(sampler, CharRenderer(), max_tokens=32)
    message = asyncio.run(completer([{"role": "user", "content": "hi"}]))
    assert message == {"role": "assistant", "content": "hello"}
    prompt, _, params = sampler.requests[0]
    assert "".join(map(chr, prompt.to_ints())) == "user:hi\nassistant:"
    assert params.stop == [STOP]


def test_grouped_completer_merges_identical_concurrent_prompts():
    sampler = LatencySampler()
    policy = GroupedTokenCompleter(sampler, max_tokens=4)
    prompt_a, prompt_b = types.ModelInput.from_ints([1, 2]), types.ModelInput.from_ints([3])

    async def go() -> list[Any]:
        return await asyncio.gather(
            *[policy(prompt_a, [0]) for _ in range(4)], *[policy(prompt_b, [0]) for _ in range(2)]
        )

    results = asyncio.run(go())
    assert sorted(sampler.calls) == [2, 4]
    # every request got its own sample
    assert [r.tokens[0] for r in results] == [10, 11, 12, 13, 10, 11]


def test_grouped_completer_passes_a_sampler_failure_to_every_request():
    class Failing:
        def sample(self, prompt: Any, num_samples: int, sampling_params: Any) -> Any:
            async def fail() -> Any:
                raise RuntimeError("sampler down")

            return fail()

    policy = GroupedTokenCompleter(Failing(), max_tokens=4)

    async def go() -> list[Any]:
        prompt = types.ModelInput.from_ints([1])
        return await asyncio.gather(
            *[policy(prompt, [0]) for _ in range(3)], return_exceptions=True
        )

    results = asyncio.run(go())
    assert all(isinstance(r, RuntimeError) for r in results)
