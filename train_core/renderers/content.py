"""Helpers over message content: text extraction, and parsing `<think>` / `<tool_call>` blocks."""

from __future__ import annotations

import json
import re

from train_core.renderers.types import (
    Content,
    ContentPart,
    Message,
    ParseFailureKind,
    ParseTermination,
    RendererError,
    TextPart,
    ThinkingPart,
    ToolCall,
    UnparsedToolCall,
)

UNTERMINATED_TOOL_BLOCK_ERROR = "unterminated tool block"
"""Prefix of the error of an UnparsedToolCall made for a tool block that was opened, never closed."""

_MAX_RAW_CHARS = 16384

_THINK_OR_TOOL_RE = re.compile(r"<think>(.*?)</think>|<tool_call>(.*?)</tool_call>", re.DOTALL)
_THINK_RE = re.compile(r"<think>(.*?)</think>", re.DOTALL)


def ensure_text(content: Content) -> str:
    """The content as one string; raises when it holds anything but a single text part."""
    if isinstance(content, str):
        return content
    if len(content) == 1 and content[0]["type"] == "text":
        return content[0]["text"]
    raise RendererError(
        f"expected text-only message content, got a list of {len(content)} parts "
        f"of types {[p['type'] for p in content]}"
    )


def ensure_list(content: Content) -> list[ContentPart]:
    """The content as a list of parts (a string becomes one TextPart)."""
    if isinstance(content, str):
        return [TextPart(type="text", text=content)]
    return content


def has_thinking(content: Content) -> bool:
    """Whether content carries reasoning: a ThinkingPart, or an opening `<think>` in a string."""
    if isinstance(content, list):
        return any(p["type"] == "thinking" for p in content)
    return "<think>" in content


def remove_thinking(parts: list[ContentPart]) -> list[ContentPart]:
    """The parts without ThinkingParts."""
    return [p for p in parts if p["type"] != "thinking"]


def get_text_content(message: Message) -> str:
    """The message's visible text: a string as is, else its TextParts joined (thinking dropped)."""
    content = message["content"]
    if isinstance(content, str):
        return content
    return "".join(p["text"] for p in content if p["type"] == "text")


def format_content_as_string(content: Content, separator: str = "\n") -> str:
    """Every part as readable text (thinking in `<think>` tags), joined; for logs and transcripts."""
    if isinstance(content, str):
        return content
    pieces: list[str] = []
    for p in content:
        if p["type"] == "thinking":
            pieces.append(f"<think>{p['thinking']}</think>")
        elif p["type"] == "text":
            pieces.append(p["text"])
        elif p["type"] == "image":
            image = p["image"]
            pieces.append(
                f"<image>{image if isinstance(image, str) else type(image).__name__}</image>"
            )
        else:
            raise RendererError(f"unknown content part type {p['type']!r}")
    return separator.join(pieces)


def reject_media(content: Content, renderer_name: str) -> None:
    """Raise when content holds image or audio parts, which these text renderers cannot encode."""
    if isinstance(content, list):
        for p in content:
            if p["type"] not in ("text", "thinking"):
                raise RendererError(
                    f"{renderer_name} renders text and thinking parts only, got a {p['type']!r} part"
                )


def tool_call_payload(tool_call: ToolCall) -> dict[str, object]:
    """The `{"name", "arguments"}` object written inside `<tool_call>` blocks (arguments decoded)."""
    return {"name": tool_call.function.name, "arguments": json.loads(tool_call.function.arguments)}


def tool_call_blocks(tool_calls: list[ToolCall]) -> str:
    """Hermes-style `<tool_call>\n{json}\n</tool_call>` blocks, one after another on new lines."""
    return "\n".join(
        f"<tool_call>\n{json.dumps(tool_call_payload(tc))}\n</tool_call>" for tc in tool_calls
    )


def parse_tool_call_json(body: str, raw_text: str) -> ToolCall | UnparsedToolCall:
    """Parse the JSON object of a `<tool_call>` block; failures become an UnparsedToolCall."""
    try:
        obj = json.loads(body.strip())
    except json.JSONDecodeError as e:
        return UnparsedToolCall(raw_text=raw_text, error=f"Invalid JSON: {e}")
    if not isinstance(obj, dict):
        return UnparsedToolCall(raw_text=raw_text, error="Tool call is not a JSON object")
    name, arguments, call_id = obj.get("name"), obj.get("arguments"), obj.get("id")
    if not isinstance(name, str):
        return UnparsedToolCall(raw_text=raw_text, error="Missing or invalid 'name' field")
    if not isinstance(arguments, dict):
        return UnparsedToolCall(raw_text=raw_text, error="Missing or invalid 'arguments' field")
    return ToolCall(
        function=ToolCall.FunctionBody(name=name, arguments=json.dumps(arguments)),
        id=call_id if isinstance(call_id, str) else None,
    )


def parse_content_blocks(
    content: str,
) -> tuple[list[ContentPart], list[ToolCall | UnparsedToolCall]] | None:
    """Split text with `<think>` and `<tool_call>` blocks into parts and tool calls, in order.

    Returns None when neither tag occurs (callers keep the string). Text between blocks is kept
    byte for byte so that parse then render is the identity; empty thinking blocks are dropped.
    """
    if "<think>" not in content and "<tool_call>" not in content:
        return None
    parts: list[ContentPart] = []
    calls: list[ToolCall | UnparsedToolCall] = []
    pos = 0
    for m in _THINK_OR_TOOL_RE.finditer(content):
        if m.start() > pos:
            parts.append(TextPart(type="text", text=content[pos : m.start()]))
        if m.group(1) is not None:
            if m.group(1):
                parts.append(ThinkingPart(type="thinking", thinking=m.group(1)))
        else:
            calls.append(parse_tool_call_json(m.group(2), m.group(0)))
        pos = m.end()
    if pos < len(content):
        parts.append(TextPart(type="text", text=content[pos:]))
    return parts, calls


def parse_think_blocks(content: str) -> list[ContentPart] | None:
    """Split text with `<think>` blocks into ThinkingPart / TextPart; None when there is no `<think>`."""
    if "<think>" not in content:
        return None
    parts: list[ContentPart] = []
    pos = 0
    for m in _THINK_RE.finditer(content):
        if m.start() > pos:
            parts.append(TextPart(type="text", text=content[pos : m.start()]))
        if m.group(1):
            parts.append(ThinkingPart(type="thinking", thinking=m.group(1)))
        pos = m.end()
    if pos < len(content):
        parts.append(TextPart(type="text", text=content[pos:]))
    return parts


def detect_unterminated_tool_block(
    content: str, open_marker: str, close_marker: str
) -> UnparsedToolCall | None:
    """An UnparsedToolCall for a tool block opened more often than closed, else None.

    Without this a response that stopped cleanly but left its tool call open would silently read
    as plain text and the call would be lost.
    """
    opens = content.count(open_marker)
    if opens == 0 or opens <= content.count(close_marker):
        return None
    return UnparsedToolCall(
        raw_text=content[content.rfind(open_marker) :][:_MAX_RAW_CHARS],
        error=(
            f"{UNTERMINATED_TOOL_BLOCK_ERROR}: '{open_marker}' opened without a "
            f"matching '{close_marker}'"
        ),
    )


def classify_parse_failure(
    message: Message, termination: ParseTermination
) -> tuple[ParseFailureKind, str] | None:
    """(STRUCTURAL, why) when the response did not end cleanly; (CONTENT, errors) when a tool
    call failed to parse; None when the response parsed cleanly."""
    if not termination.is_clean:
        return (
            ParseFailureKind.STRUCTURAL,
            f"response did not terminate cleanly (termination={termination.value})",
        )
    unparsed = message.get("unparsed_tool_calls") or []
    if unparsed:
        return ParseFailureKind.CONTENT, "\n".join(tc.error for tc in unparsed)[:_MAX_RAW_CHARS]
    return None
