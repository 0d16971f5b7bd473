"""POST /v1/completions: text (or token) prompts in, OpenAI `text_completion` objects out."""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from kitchen.serve.openai.generate import (
    Choice,
    Scores,
    TokenEvent,
    check_prompt,
    finished,
    generate,
    sampling_params,
    score,
)
from kitchen.serve.openai.models import ServedModel
from kitchen.serve.openai.schemas import CompletionRequest
from kitchen.serve.openai.text import TextStream, final_text


def prompt_tokens(model: ServedModel, request: CompletionRequest) -> list[list[int]]:
    """The request's prompts as token lists (a string is encoded as the tokenizer does)."""
    raw = request.prompt
    batch: list[Any] = (
        raw if isinstance(raw, list) and raw and not isinstance(raw[0], int) else [raw]
    )
    prompts = [model.tokenizer.encode(p) if isinstance(p, str) else list(p) for p in batch]
    for p in prompts:
        check_prompt(p, model.max_context)
    return prompts


def _params(model: ServedModel, request: CompletionRequest) -> Any:
    stops = request.stop_strings
    # Tinker's rule: a stop list replaces EOS; OpenAI's stop strings come on top of it. The SDK's
    # SamplingParams takes strings or token ids, not both: EOS goes as its text.
    eos = [model.tokenizer.decode([t]) for t in sorted(model.sampler.eos_ids())]
    stop = [*stops, *eos] if stops else None
    return sampling_params(
        request.max_tokens, request.temperature, request.top_p, request.seed, stop
    )


async def complete(model: ServedModel, request: CompletionRequest) -> dict[str, Any]:
    prompts = prompt_tokens(model, request)
    choices = await finished(model.sampler, prompts, request.n, _params(model, request))
    stop_ids = model.sampler.eos_ids()
    out = []
    for index, choice in enumerate(choices):
        prompt = prompts[choice.prompt_index]
        text = final_text(model.tokenizer, choice.tokens, request.stop_strings, stop_ids)
        if request.echo:
            text = model.tokenizer.decode(prompt, skip_special_tokens=False) + text
        logprobs = None
        if request.logprobs is not None:
            logprobs = await _logprobs(model, request, prompt, choice)
        out.append(
            {
                "index": index,
                "text": text,
                "logprobs": logprobs,
                "finish_reason": choice.stop_reason,
            }
        )
    return {
        "id": f"cmpl-{uuid.uuid4().hex}",
        "object": "text_completion",
        "created": int(time.time()),
        "model": model.name,
        "choices": out,
        "usage": usage(sum(len(p) for p in prompts), choices),
    }


async def stream(model: ServedModel, request: CompletionRequest) -> AsyncIterator[dict[str, Any]]:
    """The completion as `text_completion` chunks: text deltas, then each choice's finish_reason."""
    if request.logprobs is not None:
        from kitchen.serve.errors import UserError

        raise UserError("logprobs with stream=true is not supported; ask without streaming")
    prompts = prompt_tokens(model, request)
    stop_ids = model.sampler.eos_ids()
    n_choices = len(prompts) * request.n
    texts = [TextStream(model.tokenizer, request.stop_strings, stop_ids) for _ in range(n_choices)]
    head = {
        "id": f"cmpl-{uuid.uuid4().hex}",
        "object": "text_completion",
        "created": int(time.time()),
        "model": model.name,
    }

    def chunk(index: int, text: str, finish: str | None) -> dict[str, Any]:
        choice = {"index": index, "text": text, "logprobs": None, "finish_reason": finish}
        return {**head, "choices": [choice]}

    if request.echo:
        for index in range(n_choices):
            prompt = prompts[index // request.n]
            yield chunk(index, model.tokenizer.decode(prompt, skip_special_tokens=False), None)
    async for item in generate(model.sampler, prompts, request.n, _params(model, request)):
        if isinstance(item, TokenEvent):
            if delta := texts[item.index].push(item.token):
                yield chunk(item.index, delta, None)
            continue
        for index, choice in enumerate(item):
            yield chunk(index, texts[index].finish(), choice.stop_reason)
        if request.include_usage:
            yield {**head, "choices": [], "usage": usage(sum(map(len, prompts)), item)}


def usage(prompt_tokens: int, choices: list[Choice]) -> dict[str, int]:
    completion = sum(len(c.tokens) for c in choices)
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion,
        "total_tokens": prompt_tokens + completion,
    }


async def _logprobs(
    model: ServedModel, request: CompletionRequest, prompt: list[int], choice: Choice
) -> dict[str, Any]:
    """OpenAI's legacy logprobs object: every generated token (the prompt's too with echo), its
    logprob and its `logprobs` most likely alternatives."""
    top_k = request.logprobs or 0
    tokens = [*prompt, *choice.tokens] if request.echo else list(choice.tokens)
    if request.echo or top_k:
        scores = await score(model.sampler, [*prompt, *choice.tokens], top_k)
        if not request.echo:  # only the generated positions
            scores = Scores(scores.logprobs[len(prompt) :], scores.top[len(prompt) :])
    else:
        scores = Scores(list(choice.logprobs), [None] * len(choice.tokens))
    decode = model.tokenizer.decode
    strings = [decode([t], skip_special_tokens=False) for t in tokens]
    offsets, at = [], 0
    for s in strings:
        offsets.append(at)
        at += len(s)
    return {
        "tokens": strings,
        "token_logprobs": scores.logprobs,
        "top_logprobs": [None if top is None else _top_dict(decode, top) for top in scores.top],
        "text_offset": offsets,
    }


def _top_dict(decode: Any, top: list[tuple[int, float]]) -> dict[str, float]:
    """{token text: logprob}, most likely first; of two tokens with the same text, the likelier."""
    out: dict[str, float] = {}
    for token, logprob in top:
        out.setdefault(decode([token], skip_special_tokens=False), logprob)
    return out
