"""POST /v1/chat/completions: the conversation is rendered with the model's own chat format
(train_core.renderers) and the reply parsed by it, so thinking and tool calls come back as the
fields OpenAI clients read (`reasoning_content`, `tool_calls`)."""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from kitchen.serve.errors import UserError
from kitchen.serve.openai.completions import usage
from kitchen.serve.openai.generate import (
    Choice,
    TokenEvent,
    check_prompt,
    finished,
    generate,
    sampling_params,
    score,
)
from kitchen.serve.openai.models import ServedModel
from kitchen.serve.openai.schemas import ChatRequest
from kitchen.serve.openai.text import TextStream


def to_message(raw: dict[str, Any]) -> dict[str, Any]:
    """An OpenAI chat message -> a train_core `Message`."""
    from train_core.renderers import ToolCall

    role = raw.get("role")
    if not isinstance(role, str):
        raise UserError(f"message {raw!r}: expected a role")
    content = raw.get("content") or ""
    if isinstance(content, list):
        kinds = {part.get("type") for part in content if isinstance(part, dict)}
        if kinds - {"text"}:
            raise UserError(f"message content parts {sorted(map(str, kinds))}: only text is served")
        content = "".join(part["text"] for part in content)
    message: dict[str, Any] = {"role": role, "content": content}
    if thinking := raw.get("reasoning_content"):
        message["content"] = [{"type": "thinking", "thinking": thinking}]
        message["content"] += [{"type": "text", "text": content}] if content else []
    if calls := raw.get("tool_calls"):
        message["tool_calls"] = [
            ToolCall(id=c.get("id"), function=ToolCall.FunctionBody(**c["function"])) for c in calls
        ]
    for key in ("tool_call_id", "name"):
        if key in raw:
            message[key] = raw[key]
    return message


def _conversation(model: ServedModel, request: ChatRequest) -> list[dict[str, Any]]:
    messages = [to_message(m) for m in request.messages]
    if not request.tools:
        return messages
    system = ""
    if messages[0]["role"] == "system" and isinstance(messages[0]["content"], str):
        system, messages = messages[0]["content"], messages[1:]
    specs = [
        {
            "name": t["function"]["name"],
            "description": t["function"].get("description", ""),
            "parameters": t["function"].get("parameters", {}),
        }
        for t in request.tools
    ]
    try:
        prefix = model.renderer().create_conversation_prefix_with_tools(specs, system)
    except NotImplementedError as e:
        raise UserError(f"model {model.name!r}: {e}") from None
    return [*prefix, *messages]


def _prompt(model: ServedModel, request: ChatRequest) -> list[int]:
    from train_core.renderers import RendererError

    try:
        prompt = model.renderer().build_generation_prompt(_conversation(model, request)).to_ints()
    except (RendererError, KeyError, TypeError) as e:
        raise UserError(f"messages could not be rendered for {model.name!r}: {e}") from None
    check_prompt(prompt, model.max_context)
    return prompt


def _stops(model: ServedModel, request: ChatRequest) -> tuple[list[str], set[int]]:
    """(stop strings, stop tokens): the chat format's end of turn and the request's `stop`."""
    own = model.renderer().get_stop_sequences()
    ids = {s for s in own if isinstance(s, int)}
    return [*(s for s in own if isinstance(s, str)), *request.stop_strings], ids


def _params(model: ServedModel, request: ChatRequest) -> Any:
    strings, ids = _stops(model, request)
    if not strings:
        stop: list[str] | list[int] = sorted(ids)
    else:  # the SDK's SamplingParams takes strings or token ids, not both: ids go as their text
        stop = [*strings, *(model.tokenizer.decode([t]) for t in sorted(ids))]
    return sampling_params(
        request.token_limit, request.temperature, request.top_p, request.seed, stop
    )


def _reply(model: ServedModel, request: ChatRequest, choice: Choice) -> tuple[dict[str, Any], str]:
    """The assistant message the renderer parses from the sample, and the finish_reason."""
    parsed, _ = model.renderer().parse_response(choice.tokens)
    content = parsed["content"]
    parts = [{"type": "text", "text": content}] if isinstance(content, str) else content
    text = "".join(p["text"] for p in parts if p["type"] == "text")
    thinking = "".join(p["thinking"] for p in parts if p["type"] == "thinking")
    for stop in request.stop_strings:  # OpenAI leaves the stop string out
        text = text.split(stop, 1)[0]
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if thinking:
        message["reasoning_content"] = thinking
    calls = parsed.get("tool_calls") or []
    if calls:
        message["tool_calls"] = [
            {
                "id": c.id or f"call_{uuid.uuid4().hex[:12]}",
                "type": "function",
                "function": {"name": c.function.name, "arguments": c.function.arguments},
            }
            for c in calls
        ]
        return message, "tool_calls"
    return message, choice.stop_reason


async def _logprobs(
    model: ServedModel, request: ChatRequest, prompt: list[int], choice: Choice
) -> dict[str, Any]:
    top_k = request.top_logprobs or 0
    top: list[Any] = [None] * len(choice.tokens)
    if top_k:
        top = (await score(model.sampler, [*prompt, *choice.tokens], top_k)).top[len(prompt) :]
    decode = model.tokenizer.decode

    def entry(token: int, logprob: float) -> dict[str, Any]:
        text = decode([token], skip_special_tokens=False)
        return {"token": text, "logprob": logprob, "bytes": list(text.encode())}

    return {
        "content": [
            {**entry(t, lp), "top_logprobs": [entry(a, alp) for a, alp in (alts or [])]}
            for t, lp, alts in zip(choice.tokens, choice.logprobs, top, strict=True)
        ]
    }


def _head(model: ServedModel, kind: str) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": kind,
        "created": int(time.time()),
        "model": model.name,
    }


async def chat(model: ServedModel, request: ChatRequest) -> dict[str, Any]:
    prompt = _prompt(model, request)
    choices = await finished(model.sampler, [prompt], request.n, _params(model, request))
    out = []
    for index, choice in enumerate(choices):
        message, finish = _reply(model, request, choice)
        logprobs = await _logprobs(model, request, prompt, choice) if request.logprobs else None
        out.append(
            {"index": index, "message": message, "logprobs": logprobs, "finish_reason": finish}
        )
    return {
        **_head(model, "chat.completion"),
        "choices": out,
        "usage": usage(len(prompt), choices),
    }


async def stream(model: ServedModel, request: ChatRequest) -> AsyncIterator[dict[str, Any]]:
    """`chat.completion.chunk`s: the role, content deltas as tokens arrive, then per choice the
    tool calls the renderer parsed (if any) and the finish_reason. Thinking, if the format has
    it, arrives inline in the content while streaming."""
    if request.logprobs:
        raise UserError("logprobs with stream=true is not supported; ask without streaming")
    prompt = _prompt(model, request)
    strings, ids = _stops(model, request)
    texts = [TextStream(model.tokenizer, strings, ids) for _ in range(request.n)]
    head = _head(model, "chat.completion.chunk")

    def chunk(index: int, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        choice = {"index": index, "delta": delta, "logprobs": None, "finish_reason": finish}
        return {**head, "choices": [choice]}

    for index in range(request.n):
        yield chunk(index, {"role": "assistant", "content": ""})
    async for item in generate(model.sampler, [prompt], request.n, _params(model, request)):
        if isinstance(item, TokenEvent):
            if delta := texts[item.index].push(item.token):
                yield chunk(item.index, {"content": delta})
            continue
        for index, choice in enumerate(item):
            if rest := texts[index].finish():
                yield chunk(index, {"content": rest})
            message, finish = _reply(model, request, choice)
            tool_calls = message.get("tool_calls", [])
            for i, call in enumerate(tool_calls):
                yield chunk(index, {"tool_calls": [{"index": i, **call}]})
            yield chunk(index, {}, finish)
        if request.include_usage:
            yield {**head, "choices": [], "usage": usage(len(prompt), item)}
