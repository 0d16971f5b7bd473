"""POST /v1/responses (OpenAI's Responses API, the Agents SDK's default) as a translation onto
/v1/chat/completions: the request becomes a chat request, the chat answer (or its chunks) the
Responses object (or its server-sent events). Whatever the chat route does (its renderer, its
records) applies here unchanged.

    input items                         chat messages
    {"role": r, "content": ...}         {"role": r, ...} (developer -> system)
    reasoning, assistant message and    one assistant message (reasoning_content, content,
      function_call items in a row        tool_calls)
    function_call_output                {"role": "tool", "tool_call_id": call_id, ...}

Nothing is stored: `store`, `previous_response_id` and `conversation` are refused, and clients
send the whole conversation each turn (the Agents SDK does by default).
"""

from __future__ import annotations

import itertools
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

from kitchen.serve.errors import UserError
from kitchen.serve.openai.chat_stream import Event, translated_events
from kitchen.serve.openai.fields import chat_tool, check_fields, need

ROUTE = "/v1/responses"

_TRANSLATED = {
    "model",
    "input",
    "instructions",
    "tools",
    "tool_choice",
    "max_output_tokens",
    "temperature",
    "top_p",
    "stream",
    "seed",  # Kitchen's extension: the chat route's seed
}
# They change who is billed, what is cached or logged, never the sampled answer.
_NO_EFFECT = {
    "metadata",
    "user",
    "safety_identifier",
    "prompt_cache_key",
    "prompt_cache_retention",
    "prompt_cache_options",
    "service_tier",
    "stream_options",
}
_NEUTRAL: dict[str, list[Any]] = {
    "store": [False],
    "previous_response_id": [],
    "conversation": [],
    "background": [False],
    "prompt": [],
    "include": [[]],
    "parallel_tool_calls": [True],
    "max_tool_calls": [],
    "top_logprobs": [0],
    "truncation": ["disabled"],
    "reasoning": [{}],
    "text": [{}, {"format": {"type": "text"}}],
    "context_management": [[]],
    "moderation": [],
}
# The chat request's field names as the Responses request spells them, for error messages.
CHAT_FIELDS = {"messages": "input", "max_tokens": "max_output_tokens"}


def chat_request(body: dict[str, Any]) -> dict[str, Any]:
    """The /v1/chat/completions body that answers the Responses request `body`."""
    check_fields(body, ROUTE, _TRANSLATED, _NO_EFFECT, _NEUTRAL)
    if "model" not in body:
        raise UserError(f"{ROUTE}: model: field required")
    if "input" not in body:
        raise UserError(f"{ROUTE}: input: field required")
    messages = []
    if (instructions := body.get("instructions")) is not None:
        messages.append({"role": "system", "content": need(instructions, str, "instructions")})
    messages += _messages(body["input"])
    chat: dict[str, Any] = {"model": body["model"], "messages": messages}
    tools = [
        _tool(t, f"tools[{i}]") for i, t in enumerate(need(body.get("tools") or [], list, "tools"))
    ]
    choice = body.get("tool_choice") or "auto"
    if choice not in ("auto", "none"):
        raise UserError(
            f"{ROUTE}: tool_choice={choice!r} is not supported by kitchen serve; "
            "expected 'auto' or 'none' (sampling is not constrained to a call)"
        )
    if tools and choice == "auto":  # "none": the model is not told of any tool
        chat["tools"] = tools
    elif choice == "none":  # passed on: the chat route may act on it too
        chat["tool_choice"] = "none"
    for name in ("temperature", "top_p", "seed"):
        if body.get(name) is not None:
            chat[name] = body[name]
    if body.get("max_output_tokens") is not None:
        chat["max_tokens"] = body["max_output_tokens"]
    if body.get("stream"):
        chat["stream"] = True
        chat["stream_options"] = {"include_usage": True}
    return chat


def _messages(input_: Any) -> list[dict[str, Any]]:
    if isinstance(input_, str):
        return [{"role": "user", "content": input_}]
    messages: list[dict[str, Any]] = []
    calls: dict[str, str] = {}  # call_id -> function name, for the tool messages

    def assistant(text_next: bool) -> dict[str, Any]:
        """The assistant message the next assistant-side item joins: text after a tool call
        starts a new one (the model wrote its calls last)."""
        last = messages[-1] if messages else None
        if last is None or last["role"] != "assistant" or (text_next and last.get("tool_calls")):
            last = {"role": "assistant", "content": ""}
            messages.append(last)
        return last

    for i, item in enumerate(need(input_, list, "input")):
        where = f"input[{i}]"
        need(item, dict, where)
        kind = item.get("type", "message")
        if kind == "message":
            role = item.get("role")
            text = _text(item.get("content"), f"{where}.content")
            if role == "assistant":
                message = assistant(text_next=True)
                message["content"] += text
            elif role in ("user", "system", "developer"):
                messages.append(
                    {"role": "system" if role == "developer" else role, "content": text}
                )
            else:
                raise UserError(
                    f"{where}.role: {role!r}; expected user, assistant, system or developer"
                )
        elif kind == "function_call":
            call_id = need(item.get("call_id"), str, f"{where}.call_id")
            name = need(item.get("name"), str, f"{where}.name")
            arguments = need(item.get("arguments"), str, f"{where}.arguments")
            assistant(text_next=False).setdefault("tool_calls", []).append(
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": name, "arguments": arguments},
                }
            )
            calls[call_id] = name
        elif kind == "function_call_output":
            call_id = need(item.get("call_id"), str, f"{where}.call_id")
            output = _text(item.get("output"), f"{where}.output")
            tool = {"role": "tool", "tool_call_id": call_id, "content": output}
            if call_id in calls:
                tool["name"] = calls[call_id]
            messages.append(tool)
        elif kind == "reasoning":
            parts = item.get("content") or item.get("summary") or []
            thinking = "".join(
                need(p, dict, f"{where}.content").get("text", "") for p in need(parts, list, where)
            )
            if item.get("encrypted_content"):
                raise UserError(f"{where}.encrypted_content: not supported by kitchen serve")
            message = {"role": "assistant", "content": "", "reasoning_content": thinking}
            messages.append(message)
        else:
            raise UserError(
                f"{where}.type: {kind!r} is not supported by kitchen serve; expected message, "
                "function_call, function_call_output or reasoning"
            )
    return messages


_TEXT_PARTS = {"input_text", "output_text", "text"}


def _text(content: Any, where: str) -> str:
    """The text of a message's (or a tool output's) content: a string or text parts."""
    if isinstance(content, str):
        return content
    parts = need(content, list, where)
    texts = []
    for j, part in enumerate(parts):
        need(part, dict, f"{where}[{j}]")
        if part.get("type") not in _TEXT_PARTS:
            raise UserError(
                f"{where}[{j}].type: {part.get('type')!r} is not supported by kitchen serve; "
                "only text is served"
            )
        texts.append(need(part.get("text"), str, f"{where}[{j}].text"))
    return "".join(texts)


def _tool(tool: Any, where: str) -> dict[str, Any]:
    """A Responses function tool (name, description, parameters at the top) -> a chat tool.
    `strict` is taken but not enforced: arguments are what the model wrote."""
    need(tool, dict, where)
    if tool.get("type") != "function":
        raise UserError(
            f"{where}.type: {tool.get('type')!r} is not supported by kitchen serve; "
            "only function tools are served"
        )
    return chat_tool(tool, where, "parameters", optional=True)


def _head(body: dict[str, Any]) -> dict[str, Any]:
    """The fields of the Response object that echo the request."""
    return {
        "id": f"resp_{uuid.uuid4().hex}",
        "object": "response",
        "created_at": int(time.time()),
        "model": body["model"],
        "instructions": body.get("instructions"),
        "max_output_tokens": body.get("max_output_tokens"),
        "metadata": body.get("metadata") or {},
        "parallel_tool_calls": True,
        "previous_response_id": None,
        "reasoning": None,
        "store": False,
        "temperature": body.get("temperature", 1.0),
        "text": {"format": {"type": "text"}},
        "tool_choice": body.get("tool_choice") or "auto",
        "tools": body.get("tools") or [],
        "top_p": body.get("top_p", 1.0),
        "truncation": "disabled",
        "user": body.get("user"),
        "error": None,
        "incomplete_details": None,
        "usage": None,
    }


def _usage(usage: dict[str, int]) -> dict[str, Any]:
    return {
        "input_tokens": usage["prompt_tokens"],
        "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
        "output_tokens": usage["completion_tokens"],
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": usage["prompt_tokens"] + usage["completion_tokens"],
    }


def _finished(
    head: dict[str, Any], finish: str | None, output: list[Any], usage: Any
) -> dict[str, Any]:
    incomplete = finish == "length"
    return {
        **head,
        "status": "incomplete" if incomplete else "completed",
        "incomplete_details": {"reason": "max_output_tokens"} if incomplete else None,
        "output": output,
        "usage": _usage(usage) if usage else None,
    }


def _message_item(text: str, status: str) -> dict[str, Any]:
    return {
        "id": f"msg_{uuid.uuid4().hex}",
        "type": "message",
        "role": "assistant",
        "status": status,
        "content": [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}],
    }


def _call_item(call: dict[str, Any], status: str) -> dict[str, Any]:
    return {
        "id": f"fc_{uuid.uuid4().hex}",
        "type": "function_call",
        "call_id": call["id"],
        "name": call["function"]["name"],
        "arguments": call["function"]["arguments"],
        "status": status,
    }


def response(body: dict[str, Any], answer: dict[str, Any]) -> dict[str, Any]:
    """The Response object of the chat answer `answer` to `chat_request(body)`."""
    choice = answer["choices"][0]
    message, finish = choice["message"], choice["finish_reason"]
    status = "incomplete" if finish == "length" else "completed"
    output: list[dict[str, Any]] = []
    if thinking := message.get("reasoning_content"):
        output.append(
            {
                "id": f"rs_{uuid.uuid4().hex}",
                "type": "reasoning",
                "summary": [],
                "content": [{"type": "reasoning_text", "text": thinking}],
            }
        )
    calls = message.get("tool_calls") or []
    if message.get("content") or not calls:
        output.append(_message_item(message.get("content") or "", status))
    output += [_call_item(c, "completed") for c in calls]
    return _finished(_head(body), finish, output, answer.get("usage"))


async def events(
    body: dict[str, Any], chunks: AsyncIterator[dict[str, Any]]
) -> AsyncIterator[dict[str, Any]]:
    """The Responses stream of the chat stream `chunks` (asked with include_usage): created,
    in_progress, a message item whose text deltas are the chat deltas, a function_call item per
    tool call, then completed (or incomplete at max_output_tokens). A failure after the first
    event is an `error` event and `response.failed`."""
    async for event in translated_events(chunks, _ResponseStream(body)):
        yield event


class _ResponseStream:
    """The Responses events of one chat stream (a StreamTranslation)."""

    what = "response"

    def __init__(self, body: dict[str, Any]) -> None:
        self.head = _head(body)
        self.numbers = itertools.count()
        self.output: list[dict[str, Any]] = []
        self.open: dict[str, Any] | None = None  # the open message item
        self.streamed = ""  # its text so far
        self.finished: str | None = None

    def _event(self, kind: str, **fields: Any) -> Event:
        return {"type": kind, "sequence_number": next(self.numbers), **fields}

    def start(self) -> Iterator[Event]:
        for kind in ("response.created", "response.in_progress"):
            yield self._event(kind, response={**self.head, "status": "in_progress", "output": []})

    def text(self, text: str) -> Iterator[Event]:
        if self.open is None:
            yield from self._open_text()
        assert self.open is not None
        self.streamed += text
        yield self._event(
            "response.output_text.delta",
            item_id=self.open["id"],
            output_index=self.output.index(self.open),
            content_index=0,
            delta=text,
            logprobs=[],
        )

    def call(self, call: dict[str, Any]) -> Iterator[Event]:
        yield from self._close_text("completed")
        item = _call_item(call, "in_progress")
        self.output.append(item)
        index = len(self.output) - 1
        yield self._event(
            "response.output_item.added", output_index=index, item={**item, "arguments": ""}
        )
        at = {"item_id": item["id"], "output_index": index}
        yield self._event("response.function_call_arguments.delta", **at, delta=item["arguments"])
        yield self._event(
            "response.function_call_arguments.done",
            **at,
            name=item["name"],
            arguments=item["arguments"],
        )
        item["status"] = "completed"
        yield self._event("response.output_item.done", output_index=index, item=item)

    def finish(self, choice: dict[str, Any]) -> Iterator[Event]:
        self.finished = choice["finish_reason"]
        status = "incomplete" if self.finished == "length" else "completed"
        if not self.output:  # an empty reply is still one message
            yield from self._open_text()
        yield from self._close_text(status)

    def _open_text(self) -> Iterator[Event]:
        self.open, self.streamed = {**_message_item("", "in_progress"), "content": []}, ""
        self.output.append(self.open)
        part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
        at = {"item_id": self.open["id"], "output_index": len(self.output) - 1}
        yield self._event(
            "response.output_item.added", output_index=at["output_index"], item=dict(self.open)
        )
        yield self._event("response.content_part.added", **at, content_index=0, part=part)

    def _close_text(self, status: str) -> Iterator[Event]:
        if self.open is None:
            return
        item, self.open = self.open, None
        done = _message_item(self.streamed, status)["content"][0]
        item.update(status=status, content=[done])
        at = {"item_id": item["id"], "output_index": self.output.index(item)}
        yield self._event(
            "response.output_text.done", **at, content_index=0, text=self.streamed, logprobs=[]
        )
        yield self._event("response.content_part.done", **at, content_index=0, part=done)
        yield self._event("response.output_item.done", output_index=at["output_index"], item=item)

    def end(self, usage: dict[str, int] | None) -> Iterator[Event]:
        final = _finished(self.head, self.finished, self.output, usage)
        kind = "response.incomplete" if final["status"] == "incomplete" else "response.completed"
        yield self._event(kind, response=final)

    def failed(self, message: str, code: str | None = None) -> Iterator[Event]:
        code = code or "server_error"
        yield self._event("error", code=code, message=message, param=None)
        failed = {**self.head, "status": "failed", "output": self.output}
        failed["error"] = {"code": code, "message": message}
        yield self._event("response.failed", response=failed)
