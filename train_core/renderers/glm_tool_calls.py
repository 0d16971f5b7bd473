"""GLM-5.3's tool calling: the tools system message and `<arg_key>`/`<arg_value>` calls.

    <tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value></tool_call>

String values are written as they are and every other value as JSON, so parsing reads a value
as JSON when it is JSON: a string argument "3" comes back as the number 3, as in any format
that writes strings unquoted.
"""

from __future__ import annotations

import json
import re
from typing import Any

from train_core.renderers.content import parse_content_blocks
from train_core.renderers.types import ContentPart, ToolCall, ToolSpec, UnparsedToolCall

# The template's text, verbatim; the leading newline is part of the message ("<|system|>\n# Tools").
_TOOLS_MESSAGE = """
# Tools

You may call one or more functions to assist with the user query.

You are provided with function signatures within <tools></tools> XML tags:
<tools>
{declarations}</tools>

For each function call, output the function name and arguments within the following XML format:
<tool_call>{{function-name}}<arg_key>{{arg-key-1}}</arg_key><arg_value>{{arg-value-1}}</arg_value><arg_key>{{arg-key-2}}</arg_key><arg_value>{{arg-value-2}}</arg_value>...</tool_call>"""

_CALL_RE = re.compile(
    r"^\s*<tool_call>\s*(?P<name>[\w\-\.]+)\s*(?P<body>.*?)\s*</tool_call>\s*$", re.DOTALL
)
_ARGUMENT_RE = re.compile(
    r"<arg_key>(?P<key>.*?)</arg_key>\s*<arg_value>(?P<value>.*?)</arg_value>", re.DOTALL
)
_NOT_SERIALIZED = ("defer_loading", "strict")


def tools_message(tools: list[ToolSpec]) -> str:
    """The tools system message: one JSON object per tool, one per line.

    As in the template, a tool with a true `defer_loading` is left out (the block stays) and the
    `defer_loading` and `strict` keys are never written.
    """
    lines = "".join(
        json.dumps({k: v for k, v in tool.items() if k not in _NOT_SERIALIZED}, ensure_ascii=False)
        + "\n"
        for tool in (dict(t) for t in tools)
        if not tool.get("defer_loading")
    )
    return _TOOLS_MESSAGE.format(declarations=lines)


def call_arguments(tool_call: ToolCall) -> dict[str, Any]:
    """The call's arguments as a dict (empty arguments are no arguments)."""
    arguments = tool_call.function.arguments
    return json.loads(arguments) if arguments else {}


def write_tool_call(tool_call: ToolCall) -> str:
    pairs = "".join(
        f"<arg_key>{key}</arg_key><arg_value>"
        f"{value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)}</arg_value>"
        for key, value in call_arguments(tool_call).items()
    )
    return f"<tool_call>{tool_call.function.name}{pairs}</tool_call>"


def _read_tool_call(raw_text: str) -> ToolCall | UnparsedToolCall:
    """One `<tool_call>` block; anything but key/value pairs inside it makes it unparsed."""
    match = _CALL_RE.match(raw_text)
    if not match:
        return UnparsedToolCall(raw_text=raw_text, error="Malformed GLM tool call")
    body = match.group("body")
    arguments: dict[str, Any] = {}
    pos = 0
    for pair in _ARGUMENT_RE.finditer(body):
        if body[pos : pair.start()].strip():
            return UnparsedToolCall(raw_text=raw_text, error="Text between tool call arguments")
        key = pair.group("key").strip()
        if not key:
            return UnparsedToolCall(raw_text=raw_text, error="Empty tool call argument key")
        try:
            arguments[key] = json.loads(pair.group("value"))
        except json.JSONDecodeError:
            arguments[key] = pair.group("value")
        pos = pair.end()
    if body[pos:].strip():
        return UnparsedToolCall(raw_text=raw_text, error="Text after the tool call arguments")
    name = match.group("name")
    return ToolCall(function=ToolCall.FunctionBody(name=name, arguments=json.dumps(arguments)))


def split_content(
    text: str,
) -> tuple[list[ContentPart], list[ToolCall], list[UnparsedToolCall]] | None:
    """Reasoning, text and tool calls of a reply; None when it has no `<think>` or `<tool_call>`.

    Blocks go through the shared JSON tool-call parser first (as tinker-cookbook's does), so
    calls that happen to be JSON come first, then the GLM-format ones in order.
    """
    blocks = parse_content_blocks(text)
    if blocks is None:
        return None
    parts, results = blocks
    calls = [r for r in results if isinstance(r, ToolCall)]
    unparsed: list[UnparsedToolCall] = []
    for result in results:
        if isinstance(result, UnparsedToolCall):
            read = _read_tool_call(result.raw_text)
            if isinstance(read, ToolCall):
                calls.append(read)
            else:
                unparsed.append(read)
    return parts, calls, unparsed
