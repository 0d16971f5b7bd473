"""POST /v1/messages (Anthropic's Messages API) as a translation onto /v1/chat/completions: the
request becomes a chat request, the chat answer (or its chunks) an Anthropic message (or its
server-sent events). Whatever the chat route does (its renderer, its records) applies here
unchanged.

    system (a string or text blocks)    the first chat message, role system
    text blocks                         the message's content
    thinking blocks (assistant)         reasoning_content
    tool_use blocks (assistant)         tool_calls, `input` as JSON arguments
    tool_result blocks (user)           {"role": "tool", "tool_call_id": tool_use_id, ...}
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

from kitchen.serve.errors import UserError
from kitchen.serve.openai.chat_stream import Event, translated_events
from kitchen.serve.openai.fields import chat_tool, check_fields, need

ROUTE = "/v1/messages"

_TRANSLATED = {
    "model",
    "max_tokens",
    "messages",
    "system",
    "stop_sequences",
    "temperature",
    "top_p",
    "tools",
    "tool_choice",
    "stream",
    "seed",  # Kitchen's extension: the chat route's seed
}
# They change what is cached, billed or how fast, never the sampled answer.
_NO_EFFECT = {"metadata", "service_tier", "cache_control", "speed", "inference_geo"}
_NEUTRAL: dict[str, list[Any]] = {
    "top_k": [],
    "thinking": [{"type": "disabled"}],
    "container": [],
    "mcp_servers": [[]],
    "context_management": [],
    "output_config": [{}],
    "diagnostics": [],
}
# The chat request's field names as the Messages request spells them, for error messages.
CHAT_FIELDS = {"stop": "stop_sequences"}


def chat_request(body: dict[str, Any]) -> dict[str, Any]:
    """The /v1/chat/completions body that answers the Messages request `body`."""
    check_fields(body, ROUTE, _TRANSLATED, _NO_EFFECT, _NEUTRAL)
    for name in ("model", "max_tokens", "messages"):
        if name not in body:
            raise UserError(f"{ROUTE}: {name}: field required")
    messages = []
    if (system := body.get("system")) is not None:
        messages.append({"role": "system", "content": _text_of(system, "system")})
    for i, message in enumerate(need(body["messages"], list, "messages")):
        messages += _messages(message, f"messages[{i}]")
    chat: dict[str, Any] = {
        "model": body["model"],
        "messages": messages,
        "max_tokens": need(body["max_tokens"], int, "max_tokens"),
    }
    tools = [
        _tool(t, f"tools[{i}]") for i, t in enumerate(need(body.get("tools") or [], list, "tools"))
    ]
    choice = _tool_choice(body.get("tool_choice"))
    if tools and choice == "auto":  # "none": the model is not told of any tool
        chat["tools"] = tools
    elif choice == "none":  # passed on: the chat route may act on it too
        chat["tool_choice"] = "none"
    stops = need(body.get("stop_sequences") or [], list, "stop_sequences")
    if stops:
        if body.get("stream"):
            raise UserError(
                f"{ROUTE}: stop_sequences with stream=true is not supported by kitchen serve; "
                "ask without streaming"
            )
        chat["stop"] = stops
        chat["logprobs"] = True  # the sampled tokens' text tells which stop sequence ended it
    for name in ("temperature", "top_p", "seed"):
        if body.get(name) is not None:
            chat[name] = body[name]
    if body.get("stream"):
        chat["stream"] = True
        chat["stream_options"] = {"include_usage": True}
    return chat


def _tool_choice(choice: Any) -> str:
    if choice is None:
        return "auto"
    need(choice, dict, "tool_choice")
    kind = choice.get("type")
    if kind not in ("auto", "none"):
        raise UserError(
            f"{ROUTE}: tool_choice.type={kind!r} is not supported by kitchen serve; expected "
            "'auto' or 'none' (sampling is not constrained to a call)"
        )
    if choice.get("disable_parallel_tool_use"):
        raise UserError(
            f"{ROUTE}: tool_choice.disable_parallel_tool_use=true is not supported by kitchen serve"
        )
    return str(kind)


def _tool(tool: Any, where: str) -> dict[str, Any]:
    """An Anthropic client tool (name, description, input_schema) -> a chat tool."""
    need(tool, dict, where)
    if tool.get("type") not in (None, "custom"):
        raise UserError(
            f"{where}.type: {tool['type']!r} is not supported by kitchen serve; "
            "only client tools (name, description, input_schema) are served"
        )
    return chat_tool(tool, where, "input_schema", optional=False)


def _blocks(content: Any, where: str) -> list[dict[str, Any]]:
    """A message's content as blocks (a string is one text block)."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    blocks = need(content, list, where)
    for j, block in enumerate(blocks):
        need(block, dict, f"{where}[{j}]")
        if block.get("citations"):
            raise UserError(f"{where}[{j}].citations: not supported by kitchen serve")
    return blocks


def _text_of(content: Any, where: str) -> str:
    """The text of a string or of text blocks (system prompts, tool results)."""
    texts = []
    for j, block in enumerate(_blocks(content, where)):
        if block.get("type") != "text":
            raise UserError(
                f"{where}[{j}].type: {block.get('type')!r} is not supported by kitchen serve; "
                "only text is served"
            )
        texts.append(need(block.get("text"), str, f"{where}[{j}].text"))
    return "".join(texts)


def _messages(message: Any, where: str) -> list[dict[str, Any]]:
    """One Anthropic message -> chat messages: an assistant turn is one message; a user turn is
    its tool results (one tool message each) and its text, in block order."""
    need(message, dict, where)
    role = message.get("role")
    blocks = _blocks(message.get("content"), f"{where}.content")
    if role == "assistant":
        out: dict[str, Any] = {"role": "assistant", "content": ""}
        for j, block in enumerate(blocks):
            at, kind = f"{where}.content[{j}]", block.get("type")
            if kind == "text":
                out["content"] += need(block.get("text"), str, f"{at}.text")
            elif kind == "thinking":
                thinking = need(block.get("thinking"), str, f"{at}.thinking")
                out["reasoning_content"] = out.get("reasoning_content", "") + thinking
            elif kind == "tool_use":
                arguments = json.dumps(need(block.get("input"), dict, f"{at}.input"))
                name = need(block.get("name"), str, f"{at}.name")
                call_id = need(block.get("id"), str, f"{at}.id")
                out.setdefault("tool_calls", []).append(
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": name, "arguments": arguments},
                    }
                )
            else:
                raise UserError(
                    f"{at}.type: {kind!r} is not supported by kitchen serve in an assistant "
                    "message; expected text, thinking or tool_use"
                )
        return [out]
    if role != "user":
        raise UserError(f"{where}.role: {role!r}; expected user or assistant")
    out_M: list[dict[str, Any]] = []
    for j, block in enumerate(blocks):
        at, kind = f"{where}.content[{j}]", block.get("type")
        if kind == "text":
            text = need(block.get("text"), str, f"{at}.text")
            if out_M and out_M[-1]["role"] == "user":
                out_M[-1]["content"] += text
            else:
                out_M.append({"role": "user", "content": text})
        elif kind == "tool_result":
            result = _text_of(block.get("content") or "", f"{at}.content")
            if block.get("is_error"):  # as the model reads it: an error said in the text
                result = f"Error: {result}"
            call_id = need(block.get("tool_use_id"), str, f"{at}.tool_use_id")
            out_M.append({"role": "tool", "tool_call_id": call_id, "content": result})
        else:
            raise UserError(
                f"{at}.type: {kind!r} is not supported by kitchen serve in a user message; "
                "expected text or tool_result"
            )
    return out_M


def _stop(body: dict[str, Any], choice: dict[str, Any]) -> tuple[str, str | None]:
    """(stop_reason, stop_sequence) of a chat choice."""
    finish = choice["finish_reason"]
    if finish == "tool_calls":
        return "tool_use", None
    if finish == "length":
        return "max_tokens", None
    sampled = "".join(t["token"] for t in (choice.get("logprobs") or {}).get("content") or [])
    found = [(sampled.find(s), s) for s in body.get("stop_sequences") or [] if s and s in sampled]
    if found:
        return "stop_sequence", min(found)[1]
    return "end_turn", None


def _usage(usage: dict[str, int] | None) -> dict[str, int]:
    usage = usage or {"prompt_tokens": 0, "completion_tokens": 0}
    return {
        "input_tokens": usage["prompt_tokens"],
        "output_tokens": usage["completion_tokens"],
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }


def _tool_use(call: dict[str, Any]) -> dict[str, Any]:
    arguments = json.loads(call["function"]["arguments"] or "{}")
    if not isinstance(arguments, dict):  # Anthropic's `input` is an object
        arguments = {"arguments": arguments}
    return {
        "type": "tool_use",
        "id": call["id"],
        "name": call["function"]["name"],
        "input": arguments,
    }


def _head(body: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": f"msg_{uuid.uuid4().hex}",
        "type": "message",
        "role": "assistant",
        "model": body["model"],
    }


def message(body: dict[str, Any], answer: dict[str, Any]) -> dict[str, Any]:
    """The Anthropic message of the chat answer `answer` to `chat_request(body)`."""
    choice = answer["choices"][0]
    reply = choice["message"]
    content: list[dict[str, Any]] = []
    if thinking := reply.get("reasoning_content"):
        content.append({"type": "thinking", "thinking": thinking, "signature": ""})
    if reply.get("content"):
        content.append({"type": "text", "text": reply["content"]})
    content += [_tool_use(c) for c in reply.get("tool_calls") or []]
    stop_reason, stop_sequence = _stop(body, choice)
    return {
        **_head(body),
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": stop_sequence,
        "usage": _usage(answer.get("usage")),
    }


async def events(
    body: dict[str, Any], chunks: AsyncIterator[dict[str, Any]]
) -> AsyncIterator[dict[str, Any]]:
    """The Messages stream of the chat stream `chunks` (asked with include_usage):
    message_start, a text block whose deltas are the chat deltas, a tool_use block per tool call,
    message_delta (stop_reason, usage), message_stop. A failure after the first event is an
    `error` event."""
    async for event in translated_events(chunks, _MessageStream(body)):
        yield event


class _MessageStream:
    """The Messages events of one chat stream (a StreamTranslation)."""

    what = "message"

    def __init__(self, body: dict[str, Any]) -> None:
        self.body = body
        self.blocks = 0  # blocks started so far
        self.text_open = False
        self.finished: dict[str, Any] | None = None

    def start(self) -> Iterator[Event]:
        yield {
            "type": "message_start",
            "message": {
                **_head(self.body),
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": _usage(None),  # the prompt's length comes with message_delta
            },
        }

    def text(self, text: str) -> Iterator[Event]:
        if not self.text_open:
            self.text_open = True
            yield {
                "type": "content_block_start",
                "index": self.blocks,
                "content_block": {"type": "text", "text": ""},
            }
            self.blocks += 1
        yield {
            "type": "content_block_delta",
            "index": self.blocks - 1,
            "delta": {"type": "text_delta", "text": text},
        }

    def call(self, call: dict[str, Any]) -> Iterator[Event]:
        yield from self._close_text()
        block = _tool_use(call)
        yield {
            "type": "content_block_start",
            "index": self.blocks,
            "content_block": {**block, "input": {}},
        }
        yield {
            "type": "content_block_delta",
            "index": self.blocks,
            "delta": {"type": "input_json_delta", "partial_json": json.dumps(block["input"])},
        }
        yield {"type": "content_block_stop", "index": self.blocks}
        self.blocks += 1

    def finish(self, choice: dict[str, Any]) -> Iterator[Event]:
        self.finished = choice
        yield from self._close_text()

    def _close_text(self) -> Iterator[Event]:
        if self.text_open:
            self.text_open = False
            yield {"type": "content_block_stop", "index": self.blocks - 1}

    def end(self, usage: dict[str, int] | None) -> Iterator[Event]:
        stop_reason, stop_sequence = _stop(self.body, self.finished or {"finish_reason": "stop"})
        counts = _usage(usage)
        yield {
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason, "stop_sequence": stop_sequence},
            "usage": {
                "input_tokens": counts["input_tokens"],
                "output_tokens": counts["output_tokens"],
            },
        }
        yield {"type": "message_stop"}

    def failed(self, message: str, code: str | None = None) -> Iterator[Event]:
        kind = "api_error" if code is None else "invalid_request_error"  # a refusal, not a fault
        yield {"type": "error", "error": {"type": kind, "message": message}}
