"""Nemotron 3 renderers: Nano / Super (`nemotron3*`) and Ultra / 3.5 (`nemotron3_ultra*`).

Qwen3.5's turn layout and XML tool calls, with the Nemotron templates' differences:
- tools are declared as XML (`<function><name>..</name><parameters>..`), after the system prompt;
- every conversation has a system turn (an empty one when none is given);
- every assistant turn whose reasoning is not shown gets `<think></think>`, history included;
  history loses its reasoning only before the last user message;
- reasoning is framed `<think>\\n..\\n</think>\\n` (Nano/Super) or `<think>\\n..</think>` (Ultra);
- a tool result ends in a newline, and each tool call is followed by one;
- thinking off prefills `<think></think>`; the low / medium efforts append `{reasoning effort:
  low}` / `{reasoning effort: efficient}` to the last user message.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Literal

from train_core.renderers.content import has_thinking
from train_core.renderers.qwen3_5 import Qwen3_5Renderer
from train_core.renderers.qwen3_vl import Segment
from train_core.renderers.types import (
    Content,
    Message,
    RenderContext,
    RenderedMessage,
    RendererError,
    TextPart,
    Tokenizer,
    ToolSpec,
)

Reasoning = Literal["full", "low", "medium", "none"]

_EFFORT_SUFFIX = {
    "low": "\n\n{reasoning effort: low}",
    "medium": "\n\n{reasoning effort: efficient}",
}


def _extra_keys(fields: Mapping[str, Any], handled: set[str]) -> list[str]:
    """The template's render_extra_keys: every other key as `<key>value</key>` (JSON for
    containers, str() for scalars)."""
    return [
        f"<{key}>{json.dumps(value) if isinstance(value, dict | list) else value}</{key}>"
        for key, value in fields.items()
        if key not in handled
    ]


def tool_declaration_xml(tool: ToolSpec) -> str:
    """One tool in the Nemotron 3 template's XML declaration format."""
    lines = ["<function>", f"<name>{tool['name']}</name>"]
    if tool.get("description", "").strip():
        lines.append(f"<description>{tool['description'].strip()}</description>")
    lines.append("<parameters>")
    params: Any = tool.get("parameters") or {}
    if isinstance(params, dict):
        for name, fields in params.get("properties", {}).items():
            lines += ["<parameter>", f"<name>{name}</name>"]
            if "type" in fields:
                lines.append(f"<type>{fields['type']}</type>")
            if "description" in fields:
                lines.append(f"<description>{fields['description'].strip()}</description>")
            if "enum" in fields:
                lines.append(f"<enum>{json.dumps(fields['enum'])}</enum>")
            lines += [*_extra_keys(fields, {"name", "type", "description", "enum"}), "</parameter>"]
        lines += _extra_keys(params, {"type", "properties", "required"})
        if "required" in params:
            lines.append(f"<required>{json.dumps(params['required'])}</required>")
    lines.append("</parameters>")
    lines += _extra_keys(tool, {"type", "name", "description", "parameters"})
    return "\n".join([*lines, "</function>"])


class Nemotron3Renderer(Qwen3_5Renderer):
    """Nemotron 3. ultra=True is the Ultra / 3.5 template; reasoning picks the thinking mode
    ("low" exists on 3 Super only, "medium" on Ultra / 3.5 Super); strip_thinking_from_history
    is the template's `truncate_history_thinking`."""

    def __init__(
        self,
        tokenizer: Tokenizer,
        image_processor: Any = None,
        reasoning: Reasoning = "full",
        ultra: bool = False,
        strip_thinking_from_history: bool = True,
    ) -> None:
        super().__init__(
            tokenizer, image_processor, strip_thinking_from_history, reasoning != "none"
        )
        self.reasoning = reasoning
        self.ultra = ultra

    @property
    def has_extension_property(self) -> bool:
        return not self.strip_thinking_from_history

    def _prepare_conversation(self, messages: list[Message]) -> list[Message]:
        # The template always opens a system turn, empty when the conversation has none.
        if messages and messages[0]["role"] == "system":
            return messages
        return [Message(role="system", content=""), *messages]

    def _trim(self, content: Content) -> Content:
        return content.strip() if isinstance(content, str) else content  # lists are not trimmed

    def render_message(self, message: Message, ctx: RenderContext) -> RenderedMessage:
        suffix = _EFFORT_SUFFIX.get(self.reasoning)
        if suffix and message["role"] == "user" and ctx.idx == ctx.last_user_index:
            content = message["content"]
            if isinstance(content, str):
                message = {**message, "content": content + suffix}
            elif self.reasoning == "low":
                raise RendererError("nemotron3_low_thinking renders text-only user messages")
            else:
                message = {**message, "content": [*content, TextPart(type="text", text=suffix)]}
        return super().render_message(message, ctx)

    def _strips_thinking(self, message: Message, ctx: RenderContext) -> bool:
        return super()._strips_thinking(message, ctx) and ctx.idx < ctx.last_user_index

    def _assistant_header_suffix(self, message: Message, ctx: RenderContext) -> str:
        historical = ctx.idx < ctx.last_user_index
        content = message["content"]
        if has_thinking(content) and (not historical or not self.strip_thinking_from_history):
            return ""  # the reasoning itself is shown
        if not self.ultra and historical and has_thinking(content) and isinstance(content, list):
            # The template keeps the "\n" after the stripped `</think>`, except where the tool
            # call branch trims the content.
            has_text = any(p["type"] == "text" and p["text"] for p in content)
            if has_text and not message.get("tool_calls"):
                return "<think></think>\n"
        return "<think></think>"

    def _thinking_text(self, thinking: str) -> str:
        return f"<think>\n{thinking}</think>" if self.ultra else f"<think>\n{thinking}\n</think>\n"

    def _think_prefill(self, in_prompt: bool) -> str:
        # The produced turn's header is split after "<think>\n" even with thinking off.
        return "<think></think>" if in_prompt and self.disables_thinking else "<think>\n"

    def _wrap_images(self, segments_S: list[Segment]) -> list[Segment]:
        """`<img>..</img>`, on a new line after text, labelled `<image N>` when a message has
        several (the Nemotron 3.5 Super template and processor)."""
        count = sum(seg["type"] == "image" for seg in segments_S)
        out: list[Segment] = []
        index, text_before = 0, ""
        for seg in segments_S:
            if seg["type"] != "image":
                out.append(seg)
                text_before = seg["text"] or text_before
                continue
            index += 1
            newline = "\n" if text_before and not text_before.endswith("\n") else ""
            label = f"<image {index}>" if count > 1 else ""
            out += [TextPart(type="text", text=f"{newline}{label}<img>"), seg]
            out.append(TextPart(type="text", text="</img>"))
            text_before = ""
        return out

    def _tool_response_open_close(self) -> tuple[str, str]:
        return "<tool_response>\n", "\n</tool_response>\n"

    def _tool_response_separator(self) -> str:
        return ""  # the previous result already ends in a newline

    def _tool_calls_text(self, message: Message) -> str:
        calls = "".join(self._xml_tool_call(tc) + "\n" for tc in message.get("tool_calls", []))
        content = message["content"]
        thinking_only = (
            isinstance(content, list)
            and any(p["type"] == "thinking" for p in content)
            and not any(p["type"] == "text" and p["text"] for p in content)
        )
        # Nano/Super: reasoning rendered last already ends in "\n".
        return ("" if thinking_only and not self.ultra else "\n") + calls

    def _tools_system_content(self, tools_text: str, system_prompt: str) -> str:
        return f"{system_prompt}\n\n{tools_text}" if system_prompt else tools_text

    def _tool_declarations(self, tools: list[ToolSpec]) -> str:
        return "\n".join(tool_declaration_xml(tool) for tool in tools)
