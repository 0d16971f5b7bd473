"""POST /v1/completions: text (or token) prompts in, OpenAI `text_completion` objects out.

`logprobs` reports the sampler's own logprob of each sampled token, at the request's temperature;
the `logprobs=k` alternatives, and the prompt's logprobs with `echo`, come from one rescoring of
prompt + sample at temperature 1. A call addressed to a rollout is recorded (CallRecorder).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from kitchen.serve.errors import UserError
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
    if model.rollout is not None and (len(prompts) != 1 or request.n != 1):
        raise UserError(
            f"{len(prompts)} prompts x n={request.n}: a call addressed to a rollout samples one "
            "choice of one prompt"
        )
    return prompts


def _params(model: ServedModel, request: CompletionRequest) -> Any:
    """The sampling params; a call addressed to a rollout is admitted by its budget here (its
    max_tokens capped to what is left)."""
    max_tokens = request.max_tokens
    if model.rollout is not None:
        max_tokens = model.rollout.admit(max_tokens)
    stops = request.stop_strings
    # Tinker's rule: a stop list replaces EOS; OpenAI's stop strings come on top of it. The SDK's
    # SamplingParams takes strings or token ids, not both: EOS goes as its text.
    eos = [model.tokenizer.decode([t]) for t in sorted(model.sampler.eos_ids())]
    stop = [*stops, *eos] if stops else None
    return sampling_params(
        max_tokens, request.temperature, request.top_p, request.seed, stop, request.top_k
    )


async def complete(model: ServedModel, request: CompletionRequest) -> dict[str, Any]:
    prompts = prompt_tokens(model, request)
    choices = await finished(model.sampler, prompts, request.n, _params(model, request))
    stop_ids = model.sampler.eos_ids()
    out = []
    for index, choice in enumerate(choices):
        prompt = prompts[choice.prompt_index]
        model.record(prompt, choice)
        text = final_text(model.tokenizer, choice.tokens, request.stop_strings, stop_ids)
        if request.echo:
            text = model.tokenizer.decode(prompt, skip_special_tokens=False) + text
        logprobs = None
        if request.logprobs is not None:
            logprobs = await _logprobs(model, request, prompt, choice)
        entry: dict[str, Any] = {
            "index": index,
            "text": text,
            "logprobs": logprobs,
            "finish_reason": choice.stop_reason,
        }
        if request.return_token_ids:
            entry |= {"prompt_token_ids": prompt, "token_ids": list(choice.tokens)}
        out.append(entry)
    return {
        "id": f"cmpl-{uuid.uuid4().hex}",
        "object": "text_completion",
        "created": int(time.time()),
        "model": model.name,
        "choices": out,
        "usage": usage(sum(len(p) for p in prompts), choices),
    }


async def stream(model: ServedModel, request: CompletionRequest) -> AsyncIterator[dict[str, Any]]:
    """The completion as `text_completion` chunks: text deltas (each with the logprobs and, with
    return_token_ids, the ids of the tokens it covers), then each choice's finish_reason."""
    if request.logprobs or (request.echo and request.logprobs is not None):
        raise UserError(
            f"logprobs={request.logprobs} (echo={request.echo}) with stream=true is not supported "
            "(alternatives and prompt logprobs come from a rescoring after the sample); ask "
            "without streaming, or with logprobs=0"
        )
    prompts = prompt_tokens(model, request)
    params = _params(model, request)  # before the echo: a refused call answers 400, not a stream
    stop_ids = model.sampler.eos_ids()
    n_choices = len(prompts) * request.n
    texts = [TextStream(model.tokenizer, request.stop_strings, stop_ids) for _ in range(n_choices)]
    head = {
        "id": f"cmpl-{uuid.uuid4().hex}",
        "object": "text_completion",
        "created": int(time.time()),
        "model": model.name,
    }

    pending: list[list[tuple[int, float]]] = [[] for _ in range(n_choices)]
    offsets = [0] * n_choices  # characters of each choice's text sent so far
    decode = model.tokenizer.decode

    def chunk(index: int, text: str, finish: str | None, first: bool = False) -> dict[str, Any]:
        tokens, pending[index] = pending[index], []
        choice: dict[str, Any] = {"index": index, "text": text, "logprobs": None}
        if request.logprobs is not None and tokens:
            strings = [decode([t], skip_special_tokens=False) for t, _ in tokens]
            at, starts = offsets[index], []
            for piece in strings:
                starts.append(at)
                at += len(piece)
            choice["logprobs"] = {
                "tokens": strings,
                "token_logprobs": [lp for _, lp in tokens],
                "top_logprobs": [None] * len(tokens),
                "text_offset": starts,
            }
        offsets[index] += len(text)
        if request.return_token_ids:
            choice["token_ids"] = [t for t, _ in tokens]
            if first:
                choice["prompt_token_ids"] = prompts[index // request.n]
        choice["finish_reason"] = finish
        return {**head, "choices": [choice]}

    started = [False] * n_choices

    def opening(index: int) -> bool:
        was, started[index] = started[index], True
        return not was

    if request.echo:
        for index in range(n_choices):
            prompt = prompts[index // request.n]
            text = decode(prompt, skip_special_tokens=False)
            yield chunk(index, text, None, first=opening(index))
    async for item in generate(model.sampler, prompts, request.n, params):
        if isinstance(item, TokenEvent):
            pending[item.index].append((item.token, item.logprob))
            if delta := texts[item.index].push(item.token):
                yield chunk(item.index, delta, None, first=opening(item.index))
            continue
        for index, choice in enumerate(item):
            model.record(prompts[choice.prompt_index], choice)
            yield chunk(index, texts[index].finish(), choice.stop_reason, first=opening(index))
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
    own: list[float | None] = list(choice.logprobs)
    if request.echo or top_k:
        scores = await score(model.sampler, [*prompt, *choice.tokens], top_k)
        # The sampled positions keep the sampler's own logprobs: a temperature-1 rescoring is not
        # what they were sampled with at any other temperature.
        head = scores.logprobs[: len(prompt)] if request.echo else []
        top = scores.top if request.echo else scores.top[len(prompt) :]
        scores = Scores([*head, *own], top)
    else:
        scores = Scores(own, [None] * len(choice.tokens))
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
