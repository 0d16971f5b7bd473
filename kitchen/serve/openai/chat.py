"""POST /v1/chat/completions: the conversation is rendered with the model's own chat format
(train_core.renderers) and the reply parsed by it, so thinking and tool calls come back as the
fields OpenAI clients read (`reasoning_content`, `tool_calls`).

Logprobs are the sampler's own for each sampled token, at the request's temperature (what the
engine sampled with); `top_logprobs` alternatives come from one rescoring of the sample at
temperature 1. A call addressed to a rollout (a gateway call) is recorded, and its prompt extends
the rollout's previous call where its messages extend that call's and its reply (CallRecorder).
"""

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
from kitchen.serve.openai.models import ChatPrompt, ServedModel
from kitchen.serve.openai.schemas import ChatRequest
from kitchen.serve.openai.text import TextStream


def to_message(raw: dict[str, Any], where: str = "message") -> dict[str, Any]:
    """An OpenAI chat message -> a train_core `Message` (`where` names it in errors)."""
    from train_core.renderers import ToolCall

    role = raw.get("role")
    if not isinstance(role, str):
        raise UserError(f"{where}.role: expected a string, got {role!r}")
    content = raw.get("content") or ""
    if isinstance(content, list):
        kinds = {part.get("type") for part in content if isinstance(part, dict)}
        if kinds - {"text"}:
            raise UserError(
                f"{where}.content: parts {sorted(map(str, kinds))}; only text is served"
            )
        content = "".join(part["text"] for part in content)
    elif not isinstance(content, str):
        raise UserError(f"{where}.content: expected a string or text parts")
    message: dict[str, Any] = {"role": role, "content": content}
    if thinking := raw.get("reasoning_content"):
        message["content"] = [{"type": "thinking", "thinking": thinking}]
        message["content"] += [{"type": "text", "text": content}] if content else []
    if calls := raw.get("tool_calls"):
        try:
            message["tool_calls"] = [
                ToolCall(id=c.get("id"), function=ToolCall.FunctionBody(**c["function"]))
                for c in calls
            ]
        except (KeyError, TypeError, AttributeError, ValueError):
            raise UserError(
                f"{where}.tool_calls: expected [{{'id', 'function': {{'name', 'arguments'}}}}]"
            ) from None
    for key in ("tool_call_id", "name"):
        if key in raw:
            message[key] = raw[key]
    return message


def _messages(request: ChatRequest) -> list[dict[str, Any]]:
    return [to_message(m, f"messages.{i}") for i, m in enumerate(request.messages)]


def _conversation(
    model: ServedModel, request: ChatRequest, messages: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    tools = request.offered_tools
    if not tools:
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
        for t in tools
    ]
    try:
        prefix = model.renderer().create_conversation_prefix_with_tools(specs, system)
    except NotImplementedError as e:
        raise UserError(f"model {model.name!r}: {e}") from None
    return [*prefix, *messages]


def _prompt(model: ServedModel, request: ChatRequest) -> tuple[list[int], Any]:
    """The prompt's token ids, and the rollout's turn (None when the call is not addressed)."""
    from train_core.renderers import RendererError

    messages = _messages(request)
    conversation = _conversation(model, request, messages)
    renderer = model.renderer()
    try:
        prompt = renderer.build_generation_prompt(conversation).to_ints()
    except (RendererError, KeyError, TypeError) as e:
        raise UserError(f"messages could not be rendered for {model.name!r}: {e}") from None
    turn = None
    if model.rollout is not None:
        if request.n != 1:
            raise UserError(f"n={request.n}: a call addressed to a rollout samples one choice")
        rendered = ChatPrompt(messages, request.offered_tools, conversation, prompt)
        turn = model.rollout.chat_turn(renderer, rendered)
        prompt = list(turn.prompt)
    check_prompt(prompt, model.max_context)
    return prompt, turn


def _stops(model: ServedModel, request: ChatRequest) -> tuple[list[str], set[int]]:
    """(stop strings, stop tokens): the chat format's end of turn and the request's `stop`."""
    own = model.renderer().get_stop_sequences()
    ids = {s for s in own if isinstance(s, int)}
    return [*(s for s in own if isinstance(s, str)), *request.stop_strings], ids


def _admit(model: ServedModel, request: ChatRequest) -> int | None:
    """The tokens the call may sample: its own limit, capped by its rollout's budget."""
    limit = request.token_limit
    return limit if model.rollout is None else model.rollout.admit(limit)


def _params(model: ServedModel, request: ChatRequest, max_tokens: int | None) -> Any:
    strings, ids = _stops(model, request)
    if not strings:
        stop: list[str] | list[int] = sorted(ids)
    else:  # the SDK's SamplingParams takes strings or token ids, not both: ids go as their text
        stop = [*strings, *(model.tokenizer.decode([t]) for t in sorted(ids))]
    return sampling_params(
        max_tokens, request.temperature, request.top_p, request.seed, stop, request.top_k
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
    if calls and request.tool_choice != "none":  # "none": a call the model wrote is dropped
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


def _entry(model: ServedModel, token: int, logprob: float) -> dict[str, Any]:
    text = model.tokenizer.decode([token], skip_special_tokens=False)
    return {"token": text, "logprob": logprob, "bytes": list(text.encode())}


async def _logprobs(
    model: ServedModel, request: ChatRequest, prompt: list[int], choice: Choice
) -> dict[str, Any]:
    """Each sampled token's own logprob; its `top_logprobs` alternatives from a rescoring."""
    top_k = request.top_logprobs or 0
    top: list[Any] = [None] * len(choice.tokens)
    if top_k:
        top = (await score(model.sampler, [*prompt, *choice.tokens], top_k)).top[len(prompt) :]
    return {
        "content": [
            {
                **_entry(model, t, lp),
                "top_logprobs": [_entry(model, a, alp) for a, alp in (alts or [])],
            }
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
    prompt, turn = _prompt(model, request)
    params = _params(model, request, _admit(model, request))
    choices = await finished(model.sampler, [prompt], request.n, params)
    out = []
    for index, choice in enumerate(choices):
        message, finish = _reply(model, request, choice)
        model.record(prompt, choice, turn=turn, reply=message)
        logprobs = await _logprobs(model, request, prompt, choice) if request.logprobs else None
        entry = {"index": index, "message": message, "logprobs": logprobs, "finish_reason": finish}
        if request.return_token_ids:
            entry["token_ids"] = list(choice.tokens)
        out.append(entry)
    response = {
        **_head(model, "chat.completion"),
        "choices": out,
        "usage": usage(len(prompt), choices),
    }
    if request.return_token_ids:
        response["prompt_token_ids"] = prompt
    return response


async def stream(model: ServedModel, request: ChatRequest) -> AsyncIterator[dict[str, Any]]:
    """`chat.completion.chunk`s: the role, content deltas as tokens arrive (each with the logprobs
    and, with return_token_ids, the ids of the tokens it covers), then per choice the tool calls
    the renderer parsed (if any) and the finish_reason. Thinking, if the format has it, arrives
    inline in the content while streaming."""
    if request.logprobs and request.top_logprobs:
        raise UserError(
            "top_logprobs with stream=true is not supported (the alternatives come from a "
            "rescoring after the sample); ask without streaming, or with logprobs only"
        )
    prompt, turn = _prompt(model, request)
    params = _params(model, request, _admit(model, request))
    strings, ids = _stops(model, request)
    texts = [TextStream(model.tokenizer, strings, ids) for _ in range(request.n)]
    pending: list[list[tuple[int, float]]] = [[] for _ in range(request.n)]
    head = _head(model, "chat.completion.chunk")

    def chunk(
        index: int, delta: dict[str, Any], finish: str | None = None, tokens: Any = ()
    ) -> dict[str, Any]:
        choice: dict[str, Any] = {"index": index, "delta": delta, "logprobs": None}
        if request.logprobs and tokens:
            choice["logprobs"] = {
                "content": [{**_entry(model, t, lp), "top_logprobs": []} for t, lp in tokens]
            }
        if request.return_token_ids and tokens:
            choice["token_ids"] = [t for t, _ in tokens]
        choice["finish_reason"] = finish
        return {**head, "choices": [choice]}

    def flush(index: int) -> list[tuple[int, float]]:
        tokens, pending[index] = pending[index], []
        return tokens

    for index in range(request.n):
        first = chunk(index, {"role": "assistant", "content": ""})
        if index == 0 and request.return_token_ids:
            first["prompt_token_ids"] = prompt
        yield first
    async for item in generate(model.sampler, [prompt], request.n, params):
        if isinstance(item, TokenEvent):
            pending[item.index].append((item.token, item.logprob))
            if delta := texts[item.index].push(item.token):
                yield chunk(item.index, {"content": delta}, tokens=flush(item.index))
            continue
        for index, choice in enumerate(item):
            rest = texts[index].finish()
            if rest or pending[index]:
                yield chunk(index, {"content": rest}, tokens=flush(index))
            message, finish = _reply(model, request, choice)
            model.record(prompt, choice, turn=turn, reply=message)
            tool_calls = message.get("tool_calls", [])
            for i, call in enumerate(tool_calls):
                yield chunk(index, {"tool_calls": [{"index": i, **call}]})
            yield chunk(index, {}, finish)
        if request.include_usage:
            yield {**head, "choices": [], "usage": usage(len(prompt), item)}
