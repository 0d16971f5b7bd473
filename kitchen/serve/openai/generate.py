"""Run OpenAI-style generation on the engine's sampler: one sample request per prompt (its `n`
samples decode together, in the backend's shared decode batch), tokens streamed as they are chosen.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from tinker import types

from kitchen.serve.errors import UserError


@dataclass
class Choice:
    """One finished sample: its tokens, their logprobs, and why it ended ("stop" | "length")."""

    prompt_index: int
    tokens: list[int]
    logprobs: list[float]
    stop_reason: str


@dataclass(frozen=True)
class TokenEvent:
    """Choice `index` (prompt index * n + sample) just chose `token`, with this logprob (the
    sampler's own, at the request's temperature)."""

    index: int
    token: int
    logprob: float


def sampling_params(
    max_tokens: int | None,
    temperature: float,
    top_p: float,
    seed: int | None,
    stop: list[str] | list[int] | None,
    top_k: int | None = None,
) -> types.SamplingParams:
    return types.SamplingParams(
        max_tokens=max_tokens,
        temperature=temperature,
        top_p=top_p,
        top_k=-1 if top_k is None else top_k,
        seed=seed,
        stop=stop,
    )


def check_prompt(prompt: list[int], max_context: int | None) -> None:
    if not prompt:
        raise UserError("the prompt is empty; expected at least one token")
    if max_context is not None and len(prompt) >= max_context:
        raise UserError(
            f"the prompt has {len(prompt)} tokens; the model's context is {max_context}"
        )


async def generate(
    sampler: Any, prompts: list[list[int]], n: int, params: types.SamplingParams
) -> AsyncIterator[TokenEvent | list[Choice]]:
    """Yield a TokenEvent per chosen token, then the list of every choice (in index order). A
    sampler that cannot report tokens as they are chosen (a hosted one) has them all reported
    once its sample is done."""
    loop = asyncio.get_running_loop()
    events: asyncio.Queue[TokenEvent | None] = asyncio.Queue()

    def forward(prompt_index: int) -> Any:
        def on_token(sample: int, token: int, logprob: float) -> None:
            loop.call_soon_threadsafe(
                events.put_nowait, TokenEvent(prompt_index * n + sample, token, logprob)
            )

        return on_token

    live = streams_tokens(sampler)
    futures = [
        sampler.sample(types.ModelInput.from_ints(p), n, params, on_token=forward(i))
        if live
        else sampler.sample(types.ModelInput.from_ints(p), n, params)
        for i, p in enumerate(prompts)
    ]
    for future in futures:
        # The end marker queues behind every token event of this request (same loop, FIFO).
        future.add_done_callback(lambda _: loop.call_soon_threadsafe(events.put_nowait, None))
    pending = len(futures)
    while pending:
        event = await events.get()
        if event is None:
            pending -= 1
        else:
            yield event
    choices = []
    for i, future in enumerate(futures):
        response: types.SampleResponse = await future
        for seq in response.sequences:
            choices.append(Choice(i, list(seq.tokens), list(seq.logprobs or []), seq.stop_reason))
    if not live:
        for index, choice in enumerate(choices):
            for token, logprob in zip(choice.tokens, choice.logprobs, strict=True):
                yield TokenEvent(index, token, logprob)
    yield choices


def streams_tokens(sampler: Any) -> bool:
    """Whether `sampler.sample` answers `on_token` (the local engine's samplers do): every
    sampler has it from the port (kitchen.ports.SamplingClient), and the others refuse it."""
    return getattr(sampler, "streams_tokens", False) is True


async def finished(
    sampler: Any, prompts: list[list[int]], n: int, params: types.SamplingParams
) -> list[Choice]:
    """Every choice, once all are done (no streaming)."""
    async for item in generate(sampler, prompts, n, params):
        if isinstance(item, list):
            return item
    raise AssertionError("generate ends with the list of choices")


@dataclass
class Scores:
    """Per position of a scored sequence: log p(token | prefix) and the top-k there (None first)."""

    logprobs: list[float | None]
    top: list[list[tuple[int, float]] | None]


async def score(sampler: Any, tokens: list[int], top_k: int) -> Scores:
    """Logprobs of every token of `tokens`, and the `top_k` alternatives at each position: what
    OpenAI's `logprobs` / `echo` return. One forward pass, in the same decode batch queue."""
    response: types.SampleResponse = await sampler.sample(
        types.ModelInput.from_ints(tokens),
        1,
        types.SamplingParams(max_tokens=0),
        include_prompt_logprobs=True,
        topk_prompt_logprobs=top_k,
    )
    top = response.topk_prompt_logprobs if top_k > 0 else None
    return Scores(list(response.prompt_logprobs or []), list(top or [None] * len(tokens)))
