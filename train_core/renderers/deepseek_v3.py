"""DeepSeek V3.1 renderers: `deepseekv3` (thinking off, the template's default) and `deepseekv3_thinking`.

Format: `<｜begin▁of▁sentence｜>{system}<｜User｜>{q}<｜Assistant｜></think>{a}<｜end▁of▁sentence｜>`.
The system message has no role token and must come first; an assistant reply to a tool result
has no role token either; tool calls use DeepSeek's own `<｜tool▁call▁begin｜>` tokens.
"""

from __future__ import annotations

import json
import re

import tinker

from train_core.renderers.base import ThinkingHistoryRenderer
from train_core.renderers.content import (
    detect_unterminated_tool_block,
    ensure_text,
    has_thinking,
    parse_think_blocks,
    reject_media,
)
from train_core.renderers.types import (
    Message,
    RenderContext,
    RenderedMessage,
    RendererError,
    Role,
    Tokenizer,
    ToolCall,
    ToolSpec,
    UnparsedToolCall,
)

_BAR = "\uff5c"  # the full-width bar in DeepSeek's special tokens: <｜User｜>
_CALLS_BEGIN = "<｜tool▁calls▁begin｜>"
_CALLS_END = "<｜tool▁calls▁end｜>"
_CALL_BEGIN = "<｜tool▁call▁begin｜>"
_CALL_END = "<｜tool▁call▁end｜>"
_CALL_SEP = "<｜tool▁sep｜>"
_OUTPUT_BEGIN = "<｜tool▁output▁begin｜>"
_OUTPUT_END = "<｜tool▁output▁end｜>"

_CALLS_RE = re.compile(re.escape(_CALLS_BEGIN) + r"(.*?)" + re.escape(_CALLS_END), re.DOTALL)
_CALL_RE = re.compile(
    re.escape(_CALL_BEGIN) + r"(\w+)" + re.escape(_CALL_SEP) + r"(.*?)" + re.escape(_CALL_END),
    re.DOTALL,
)
_CALLS_SECTION_RE = re.compile(
    r"\s*" + re.escape(_CALLS_BEGIN) + r".*?" + re.escape(_CALLS_END), re.DOTALL
)


class _DeepSeekV3Renderer(ThinkingHistoryRenderer):
    """Shared DeepSeek V3 rendering; use one of the two subclasses.

    system_role_as_user: render a system message after the first as a user turn (the template
        only has a leading system prompt).
    strip_thinking_from_history: drop reasoning from earlier assistant turns, as the template does.
    """

    reasoning_content_field = True

    def __init__(
        self,
        tokenizer: Tokenizer,
        system_role_as_user: bool = False,
        strip_thinking_from_history: bool = True,
    ) -> None:
        super().__init__(tokenizer, strip_thinking_from_history)
        self.system_role_as_user = system_role_as_user

    def render_message(self, message: Message, ctx: RenderContext) -> RenderedMessage:
        follows_tool = ctx.prev_message is not None and ctx.prev_message["role"] == "tool"
        role = message["role"]
        content = message["content"]
        reject_media(content, type(self).__name__)
        header: list[int]
        if role == "system":
            if ctx.idx == 0:
                header = []
            elif self.system_role_as_user:
                header = [self._special_token("User")]
            else:
                raise RendererError(
                    f"DeepSeek V3 takes a system message only first (message {ctx.idx} is one); "
                    "pass system_role_as_user=True to render later ones as user turns"
                )
            body = ensure_text(content)
        elif role == "user":
            header = [self._special_token("User")]
            body = ensure_text(content)
        elif role == "assistant":
            strip = (
                self.strip_thinking_from_history
                and not message.get("tool_calls")
                and not ctx.is_last
            )
            if isinstance(content, list):
                body = "".join(
                    p["text"]
                    if p["type"] == "text"
                    else ("" if strip else f"<think>{p['thinking']}</think>")
                    for p in content
                    if p["type"] in ("text", "thinking")
                )
            else:
                body = content
            # After a tool result the reply continues the turn: no role token.
            header = [] if follows_tool else [self._special_token("Assistant")]
        elif role == "tool":
            header = list(self.tokenizer.encode(_OUTPUT_BEGIN, add_special_tokens=False))
            body = ensure_text(content) + _OUTPUT_END
        else:
            raise RendererError(
                f"DeepSeek V3 has no role {role!r}; expected system, user, assistant or tool"
            )

        if message.get("tool_calls"):
            body += _CALLS_BEGIN
            for tc in message["tool_calls"]:
                body += (
                    f"{_CALL_BEGIN}{tc.function.name}{_CALL_SEP}{tc.function.arguments}{_CALL_END}"
                )
            body += _CALLS_END
        tokens = list(self.tokenizer.encode(body, add_special_tokens=False))
        # An empty assistant message is the generation prompt's header: it gets no end token.
        if role == "assistant" and message["content"]:
            tokens.append(self._end_message_token)
        output: list[tinker.ModelInputChunk] = [tinker.EncodedTextChunk(tokens=tokens)]
        if header:
            return RenderedMessage(header=tinker.EncodedTextChunk(tokens=header), output=output)
        return RenderedMessage(output=output)

    def _special_token(self, name: str) -> int:
        text = f"<{_BAR}{name}{_BAR}>"
        tokens = self.tokenizer.encode(text, add_special_tokens=False)
        if len(tokens) != 1:
            raise RendererError(f"{text} must be one token in this tokenizer, got {tokens}")
        return int(tokens[0])

    def _encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    @property
    def _bos_tokens(self) -> list[int]:
        return [self._special_token("begin▁of▁sentence")]

    @property
    def _end_message_token(self) -> int:
        return self._special_token("end▁of▁sentence")

    def _parse_reply_text(self, message: Message, text: str) -> None:
        """DeepSeek tool calls go to tool_calls (their section is removed from the text) and
        `<think>` blocks become ThinkingParts."""
        calls, unparsed = _parse_tool_calls(text)
        for open_marker, close_marker in ((_CALLS_BEGIN, _CALLS_END), (_CALL_BEGIN, _CALL_END)):
            dangling = detect_unterminated_tool_block(text, open_marker, close_marker)
            if dangling is not None:
                unparsed.append(dangling)
                break
        if calls:
            message["tool_calls"] = calls
        if unparsed:
            message["unparsed_tool_calls"] = unparsed
        if calls or unparsed:
            text = _CALLS_SECTION_RE.sub("", text).strip()
        parts = parse_think_blocks(text)
        message["content"] = parts if parts is not None else text

    def create_conversation_prefix_with_tools(
        self, tools: list[ToolSpec], system_prompt: str = ""
    ) -> list[Message]:
        """One system message: the prompt, then a `## Tools` section in DeepSeek V3.1's layout."""
        tools_text = ""
        if tools:
            blocks = "\n".join(
                f"### {t['name']}\nDescription: {t['description']}\n\n"
                f"Parameters: {json.dumps(t['parameters'])}"
                for t in tools
            )
            tools_text = (
                "\n\n## Tools\nYou have access to the following tools:\n\n"
                f"{blocks}\n\n"
                "IMPORTANT: ALWAYS adhere to this exact format for tool use:\n"
                f"{_CALLS_BEGIN}{_CALL_BEGIN}tool_call_name{_CALL_SEP}tool_call_arguments"
                f"{_CALL_END}{_CALLS_END}\n\n"
                "Where:\n"
                "- `tool_call_name` must be an exact match to one of the available tools\n"
                "- `tool_call_arguments` must be valid JSON that strictly follows the tool's "
                "Parameters Schema\n"
                "- For multiple tool calls, chain them directly without separators or spaces"
            )
        return [Message(role="system", content=system_prompt + tools_text)]


def _parse_tool_calls(text: str) -> tuple[list[ToolCall], list[UnparsedToolCall]]:
    calls: list[ToolCall] = []
    unparsed: list[UnparsedToolCall] = []
    section = _CALLS_RE.search(text)
    if section is None:
        return calls, unparsed
    for m in _CALL_RE.finditer(section.group(1)):
        name, arguments = m.group(1), m.group(2).strip()
        try:
            json.loads(arguments)
        except json.JSONDecodeError as e:
            unparsed.append(UnparsedToolCall(raw_text=m.group(0), error=f"Invalid JSON: {e}"))
            continue
        calls.append(ToolCall(function=ToolCall.FunctionBody(name=name, arguments=arguments)))
    return calls, unparsed


class DeepSeekV3ThinkingRenderer(_DeepSeekV3Renderer):
    """Thinking mode: the prompt ends in `<think>`, earlier replies get `</think>` in their header."""

    def render_message(self, message: Message, ctx: RenderContext) -> RenderedMessage:
        rendered = super().render_message(message, ctx)
        follows_tool = ctx.prev_message is not None and ctx.prev_message["role"] == "tool"
        content = message.get("content", "")
        replies = message["role"] == "assistant" and not follows_tool
        if replies and self.strip_thinking_from_history and not ctx.is_last:
            # The template marks a past reply as "done thinking" with a bare </think>.
            header = list(rendered.header.tokens) if rendered.header else []
            return RenderedMessage(
                header=tinker.EncodedTextChunk(tokens=header + self._encode("</think>")),
                output=rendered.output,
            )
        if replies and ctx.is_last and content and not has_thinking(content):
            # A trained reply without reasoning still gets the template's empty block.
            first, *rest = rendered.output
            assert isinstance(first, tinker.EncodedTextChunk)
            return RenderedMessage(
                header=rendered.header,
                output=[
                    tinker.EncodedTextChunk(
                        tokens=self._encode("<think></think>") + list(first.tokens)
                    ),
                    *rest,
                ],
            )
        return rendered

    def build_generation_prompt(
        self, messages: list[Message], role: Role = "assistant", prefill: str | None = None
    ) -> tinker.ModelInput:
        """Prefill `<think>`, except after a tool result (tool use runs without thinking)."""
        if messages and messages[-1]["role"] == "tool":
            return super().build_generation_prompt(messages, role, prefill)
        return super().build_generation_prompt(messages, role, "<think>" + (prefill or ""))

    def _normalize_response_tokens(self, response: list[int]) -> list[int]:
        """Put back the prefilled `<think>` when the reply closes a block it did not open."""
        think_open = self.tokenizer.convert_tokens_to_ids("<think>")
        think_close = self.tokenizer.convert_tokens_to_ids("</think>")
        if (not response or response[0] != think_open) and think_close in response:
            return [think_open, *response]
        return response


class DeepSeekV3DisableThinkingRenderer(_DeepSeekV3Renderer):
    """Non-thinking mode: every reply starts after `</think>`; reasoning in content is removed."""

    @property
    def has_extension_property(self) -> bool:
        return True

    def render_message(self, message: Message, ctx: RenderContext) -> RenderedMessage:
        follows_tool = ctx.prev_message is not None and ctx.prev_message["role"] == "tool"
        replies = message["role"] == "assistant" and not follows_tool
        if replies:
            content = message["content"]
            if isinstance(content, list):
                text = "".join(p["text"] for p in content if p["type"] == "text")
            else:
                text = re.sub(r"<think>.*?</think>", "", content, flags=re.DOTALL)
            message = message.copy()
            message["content"] = text
        rendered = super().render_message(message, ctx)
        if replies:
            # In the header (weight 0), so a trained reply starts where the prompt ends.
            header = list(rendered.header.tokens) if rendered.header else []
            rendered = RenderedMessage(
                header=tinker.EncodedTextChunk(tokens=header + self._encode("</think>")),
                output=rendered.output,
            )
        return rendered
