"""Policies you can sample from: token-level (what RL uses; the grouped one samples a group's
identical prompts in one call) and message-level (through a renderer).

Same names and call shapes as tinker-cookbook's `completers`, so an Env or eval written for it
runs against a Kitchen policy. The sampling client is anything with a Tinker-style
`.sample(prompt=..., num_samples=..., sampling_params=...)` whose result can be awaited (the SDK's
APIFuture, Kitchen's APIFuture, a coroutine) or is already a `SampleResponse`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeAlias

from tinker import types

from train_core.futures import resolve_future
from train_core.renderers.types import Message

StopCondition: TypeAlias = list[str] | list[int]
"""Stop strings or stop token ids for one generation."""


class SamplingClientLike(Protocol):
    """The part of a Tinker sampling client a completer uses."""

    def sample(
        self,
        prompt: types.ModelInput,
        num_samples: int,
        sampling_params: types.SamplingParams,
    ) -> Any:
        """Returns an awaitable of `types.SampleResponse` (or the response itself)."""
        ...


class RendererLike(Protocol):
    """The renderer methods RL code relies on; train_core.renderers.Renderer satisfies it."""

    def build_generation_prompt(self, messages: list[Message]) -> types.ModelInput: ...

    def get_stop_sequences(self) -> StopCondition: ...

    def parse_response(self, response: list[int]) -> tuple[Message, Any]:
        """Returns (message, termination); termination is a ParseTermination or a bool."""
        ...


@dataclass
class TokensWithLogprobs:
    """Sampled token ids with their logprobs, why sampling stopped, and Tinker's sequence id."""

    tokens: list[int]
    maybe_logprobs: list[float] | None
    stop_reason: types.StopReason = "stop"
    sequence_id: str | None = None
    """Tinker's id for the sampled sequence; datum provenance needs it. None if unknown."""
    prompt_cache_hit_tokens: int = 0
    """Prompt tokens the sampler billed as prefix-cache hits for this sample."""

    @property
    def logprobs(self) -> list[float]:
        if self.maybe_logprobs is None:
            raise ValueError("TokensWithLogprobs.logprobs: this sample carries no logprobs")
        return self.maybe_logprobs


class TokenCompleter:
    """A policy over tokens: prompt in, sampled tokens with logprobs out."""

    async def __call__(
        self,
        model_input: types.ModelInput,
        stop: StopCondition,
        *,
        max_tokens: int | None = None,
    ) -> TokensWithLogprobs:
        """Sample one continuation; `max_tokens` caps this call below the completer's own limit."""
        raise NotImplementedError


class MessageCompleter:
    """A policy over messages: conversation in, one assistant message out."""

    async def __call__(self, messages: list[Message]) -> Message:
        raise NotImplementedError


def sampled_tokens(sequence: Any, prompt_cache_hit_tokens: int = 0) -> TokensWithLogprobs:
    """One sampled sequence of a SampleResponse as TokensWithLogprobs (RL needs the logprobs)."""
    if sequence.logprobs is None:
        raise ValueError("the sampler returned no logprobs; RL needs them per token")
    return TokensWithLogprobs(
        tokens=list(sequence.tokens),
        maybe_logprobs=list(sequence.logprobs),
        stop_reason=sequence.stop_reason,
        sequence_id=getattr(sequence, "sequence_id", None),
        prompt_cache_hit_tokens=prompt_cache_hit_tokens,
    )


@dataclass
class TinkerTokenCompleter(TokenCompleter):
    """Samples actions from a Tinker-style sampling client.

    `context_window`, when set, lowers max_tokens per call so prompt + generation fits.
    """

    sampling_client: SamplingClientLike
    max_tokens: int
    temperature: float = 1.0
    context_window: int | None = None

    async def __call__(
        self,
        model_input: types.ModelInput,
        stop: StopCondition,
        *,
        max_tokens: int | None = None,
    ) -> TokensWithLogprobs:
        budget = self.max_tokens if max_tokens is None else min(self.max_tokens, max_tokens)
        if self.context_window is not None:
            budget = min(budget, self.context_window - model_input.length)
            if budget <= 0:
                raise ValueError(
                    f"TinkerTokenCompleter: prompt of {model_input.length} tokens leaves no room "
                    f"in context_window={self.context_window}; expected a shorter prompt"
                )
        response = await resolve_future(
            self.sampling_client.sample(
                prompt=model_input,
                num_samples=1,
                sampling_params=types.SamplingParams(
                    max_tokens=budget, temperature=self.temperature, stop=stop
                ),
            )
        )
        return sampled_tokens(
            response.sequences[0], getattr(response, "prompt_cache_hit_tokens", 0)
        )


_Key = tuple[tuple[int, ...], tuple[Any, ...], int]


@dataclass(frozen=True)
class EnvPolicies:
    """One policy per env of a group: `make(j)` is env j's. For a policy with state that must
    follow the env, not the order in which the group's concurrent requests arrive (a seed stream:
    envs that render in threads ask in a timing-dependent order)."""

    make: Callable[[int], TokenCompleter]


@dataclass
class GroupedTokenCompleter(TokenCompleter):
    """A TokenCompleter that batches concurrent requests for the same prompt.

    It merges the identical prompts of a group (the N copies of one problem) into one
    `sample(num_samples=N)` call: the same samples as N separate calls, but the engine prefills
    the prompt once and decodes the N rows as one batch.

    The first request for a (prompt, stop, budget) opens a batch and yields `join_ticks` event-loop
    turns so the other rollouts of its group can join, then samples once for all of them. A
    failure or cancellation of that call reaches every request of the batch.
    """

    sampling_client: SamplingClientLike
    max_tokens: int
    temperature: float = 1.0
    join_ticks: int = 3
    calls: int = 0
    _open: dict[_Key, list[asyncio.Future[TokensWithLogprobs]]] = field(
        default_factory=dict, repr=False
    )

    async def __call__(
        self, model_input: types.ModelInput, stop: StopCondition, *, max_tokens: int | None = None
    ) -> TokensWithLogprobs:
        budget = self.max_tokens if max_tokens is None else min(self.max_tokens, max_tokens)
        try:
            key: _Key = (tuple(model_input.to_ints()), tuple(stop), budget)
        except ValueError:  # images etc.: no cheap identity, sample on its own
            return (await self._sample(model_input, stop, budget, 1))[0]
        joined = self._open.get(key)
        if joined is not None:
            future: asyncio.Future[TokensWithLogprobs] = asyncio.get_running_loop().create_future()
            joined.append(future)
            return await future
        followers: list[asyncio.Future[TokensWithLogprobs]] = []
        self._open[key] = followers
        try:
            try:
                for _ in range(self.join_ticks):
                    await asyncio.sleep(0)
            finally:
                del self._open[key]
            samples = await self._sample(model_input, stop, budget, 1 + len(followers))
        except BaseException as e:
            for f in followers:
                if f.done():
                    continue
                if isinstance(e, asyncio.CancelledError):
                    f.cancel()
                else:
                    f.set_exception(e)
            raise
        for f, sample in zip(followers, samples[1:], strict=True):
            if not f.done():
                f.set_result(sample)
        return samples[0]

    async def _sample(
        self, model_input: types.ModelInput, stop: StopCondition, budget: int, n: int
    ) -> list[TokensWithLogprobs]:
        self.calls += 1
        response = await resolve_future(
            self.sampling_client.sample(
                prompt=model_input,
                num_samples=n,
                sampling_params=types.SamplingParams(
                    max_tokens=budget, temperature=self.temperature, stop=stop
                ),
            )
        )
        out = [sampled_tokens(seq) for seq in response.sequences]
        if len(out) != n:
            raise ValueError(f"asked the sampler for {n} samples, got {len(out)}")
        return out


class TinkerMessageCompleter(MessageCompleter):
    """Samples an assistant message: render the conversation, sample, parse the tokens back."""

    def __init__(
        self,
        sampling_client: SamplingClientLike,
        renderer: RendererLike,
        max_tokens: int,
        stop_condition: StopCondition | None = None,
        temperature: float = 1.0,
    ) -> None:
        self.sampling_client = sampling_client
        self.renderer = renderer
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.stop_condition = (
            renderer.get_stop_sequences() if stop_condition is None else stop_condition
        )

    async def __call__(self, messages: list[Message]) -> Message:
        prompt = self.renderer.build_generation_prompt(messages)
        response = await resolve_future(
            self.sampling_client.sample(
                prompt=prompt,
                num_samples=1,
                sampling_params=types.SamplingParams(
                    max_tokens=self.max_tokens,
                    temperature=self.temperature,
                    stop=self.stop_condition,
                ),
            )
        )
        parsed, _termination = self.renderer.parse_response(list(response.sequences[0].tokens))
        # Only the assistant-facing fields: parse details (thinking split, raw text) stay out.
        out: Message = {"role": "assistant", "content": parsed["content"]}
        if "tool_calls" in parsed:
            out["tool_calls"] = parsed["tool_calls"]
        return out


def termination_flags(termination: Any) -> tuple[bool, bool]:
    """(is_clean, is_stop_sequence) from a renderer's parse termination.

    Accepts a tinker-cookbook ParseTermination (or anything with those two properties) and the
    older `parse_success: bool`, which only told whether the stop sequence was seen.
    """
    if isinstance(termination, bool):
        return termination, termination
    return bool(termination.is_clean), bool(termination.is_stop_sequence)
