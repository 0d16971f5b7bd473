"""Qwen3 text renderers: `qwen3` (thinking), `qwen3_disable_thinking`, `qwen3_instruct` (2507).

They follow Hugging Face's Qwen3 chat template: `<|im_start|>{role}\\n{content}<|im_end|>` with
the newline between turns in the next header, tool results as user turns wrapped in
`<tool_response>`, tool calls as `<tool_call>` JSON blocks, and the produced turn's reasoning
framed as `<think>\\n...\\n</think>\\n\\n` (reasoning is stripped from earlier assistant turns).
"""

from __future__ import annotations

import copy
import json
from typing import Any

import tinker

from train_core.renderers.base import ThinkingHistoryRenderer, single_token
from train_core.renderers.content import (
    detect_unterminated_tool_block,
    has_thinking,
    parse_content_blocks,
    reject_media,
    remove_thinking,
    tool_call_blocks,
)
from train_core.renderers.types import (
    ContentPart,
    Message,
    RenderContext,
    RenderedMessage,
    RendererError,
    Tokenizer,
    ToolCall,
    ToolSpec,
    UnparsedToolCall,
)


def _frame_thinking(reasoning: str) -> str:
    """The template's frame around the produced turn's reasoning (also when it is empty)."""
    return "<think>\n" + reasoning.strip("\n") + "\n</think>\n\n"


def _unframe_thinking(parts: list[ContentPart]) -> list[ContentPart]:
    """Undo `_frame_thinking` so that render then parse is the identity.

    The padding newlines are framing, not reasoning; an empty block means the turn did not
    reason, so it is dropped (the text after it was still left-stripped by the template).
    """
    out: list[ContentPart] = []
    after_block = False
    for p in parts:
        if p["type"] == "thinking":
            reasoning = p["thinking"].strip("\n")
            if reasoning:
                out.append({"type": "thinking", "thinking": reasoning})
            after_block = True
        elif p["type"] == "text":
            out.append(
                {"type": "text", "text": p["text"].lstrip("\n") if after_block else p["text"]}
            )
            after_block = False
        else:
            out.append(p)
            after_block = False
    return out


def _content_encoder(tokenizer: Tokenizer) -> Any:
    """A private copy of the backend tokenizer that encodes special-token text in content literally.

    A user who writes "<|im_end|>" in a message must not end the turn. Setting the flag on the
    shared tokenizer would race between threads, so a copy is configured once. Tokenizers without
    a Hugging Face backend fall back to their own `encode`.
    """
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        return None
    private = copy.deepcopy(backend)
    private.encode_special_tokens = True
    return private


class Qwen3Renderer(ThinkingHistoryRenderer):
    """Qwen3 with thinking on (the Hugging Face template's default, `enable_thinking=True`).

    strip_thinking_from_history=True (default) matches the template: reasoning is removed from
    assistant turns before the last. False keeps it, which gives the extension property
    (one sequence per multi-turn episode) at the cost of differing from the template.
    """

    reasoning_content_field = True
    frames_thinking = True
    """False for the 2507 Instruct models, which never use `<think>`."""

    def __init__(self, tokenizer: Tokenizer, strip_thinking_from_history: bool = True) -> None:
        super().__init__(tokenizer, strip_thinking_from_history)
        self._content_tokenizer = _content_encoder(tokenizer)

    def _frames_produced_turn(self, message: Message, ctx: RenderContext) -> bool:
        """Whether the template frames this message as the produced turn.

        The template frames only assistant turns after the last user message, and none at all
        when there is no user message. Keeping history's reasoning frames every assistant turn
        alike, so that a turn renders the same wherever it sits.
        """
        if not self.frames_thinking or message["role"] != "assistant":
            return False
        if ctx.last_user_index < 0:
            return False
        return ctx.is_last or not self.strip_thinking_from_history

    def render_message(self, message: Message, ctx: RenderContext) -> RenderedMessage:
        role = "user" if message["role"] == "tool" else message["role"]
        header = ("\n" if ctx.idx > 0 else "") + f"<|im_start|>{role}\n"
        content = message["content"]
        reject_media(content, type(self).__name__)
        frames = self._frames_produced_turn(message, ctx)
        reasoned = has_thinking(content)

        if isinstance(content, list):
            parts = content
            if (
                self.strip_thinking_from_history
                and message["role"] == "assistant"
                and not ctx.is_last
            ):
                parts = remove_thinking(parts)
            pieces: list[str] = []
            after_block = False
            for p in parts:
                if p["type"] == "thinking":
                    pieces.append(
                        _frame_thinking(p["thinking"])
                        if frames
                        else f"<think>{p['thinking']}</think>"
                    )
                    after_block = frames
                elif p["type"] == "text":
                    # The frame already wrote the padding, so the text must not add its own.
                    pieces.append(p["text"].lstrip("\n") if after_block else p["text"])
                    after_block = False
            body = "".join(pieces)
        elif frames and "</think>" in content:
            # An inline block is normalised the way the template normalises it.
            reasoning, _, rest = content.partition("</think>")
            body = _frame_thinking(reasoning.rpartition("<think>")[2]) + rest.lstrip("\n")
        else:
            body = content

        # The separator before tool calls asks about the message's own text, not the frame.
        has_text = bool(body)
        if frames and not reasoned:
            # The template opens a block on the produced turn whether or not it reasoned.
            body = _frame_thinking("") + body.lstrip("\n")
        if message["role"] == "tool":
            body = f"<tool_response>\n{body}\n</tool_response>"
        if "tool_calls" in message:
            body += ("\n" if has_text else "") + tool_call_blocks(message["tool_calls"])

        return RenderedMessage(
            header=tinker.EncodedTextChunk(
                tokens=self.tokenizer.encode(header, add_special_tokens=False)
            ),
            output=[
                tinker.EncodedTextChunk(tokens=self._encode_content(body)),
                tinker.EncodedTextChunk(tokens=[self._end_message_token]),
            ],
        )

    def _encode_content(self, text: str) -> list[int]:
        if self._content_tokenizer is None:
            return list(self.tokenizer.encode(text, add_special_tokens=False))
        return list(self._content_tokenizer.encode(text, add_special_tokens=False).ids)

    @property
    def _end_message_token(self) -> int:
        return single_token(self.tokenizer, "<|im_end|>")

    def _parse_reply_text(self, message: Message, text: str) -> None:
        """`<think>` blocks into ThinkingParts and `<tool_call>` blocks into tool_calls (or
        unparsed_tool_calls)."""
        blocks = parse_content_blocks(text)
        if blocks is not None:
            parts, calls = blocks
            message["content"] = _unframe_thinking(parts) if self.frames_thinking else parts
            parsed = [c for c in calls if isinstance(c, ToolCall)]
            unparsed = [c for c in calls if isinstance(c, UnparsedToolCall)]
            if parsed:
                message["tool_calls"] = parsed
            if unparsed:
                message["unparsed_tool_calls"] = unparsed
        dangling = detect_unterminated_tool_block(text, "<tool_call>", "</tool_call>")
        if dangling is not None:
            message["unparsed_tool_calls"] = [*message.get("unparsed_tool_calls", []), dangling]

    def create_conversation_prefix_with_tools(
        self, tools: list[ToolSpec], system_prompt: str = ""
    ) -> list[Message]:
        """One system message: the prompt, then the `# Tools` block of Qwen3's template."""
        tools_text = ""
        if tools:
            # The template's `tojson` writes ", " and ": " separators.
            tool_lines = "\n".join(
                json.dumps({"type": "function", "function": tool}, separators=(", ", ": "))
                for tool in tools
            )
            tools_text = (
                "# Tools\n\n"
                "You may call one or more functions to assist with the user query.\n\n"
                "You are provided with function signatures within <tools></tools> XML tags:\n"
                f"<tools>\n{tool_lines}\n</tools>\n\n"
                "For each function call, return a json object with function name and arguments "
                "within <tool_call></tool_call> XML tags:\n"
                "<tool_call>\n"
                '{"name": <function-name>, "arguments": <args-json-object>}\n'
                "</tool_call>"
            )
        content = system_prompt + "\n\n" + tools_text if system_prompt else tools_text
        return [Message(role="system", content=content)]


class Qwen3DisableThinkingRenderer(Qwen3Renderer):
    """Qwen3 with thinking off (`enable_thinking=False`): the prompt ends in an empty, closed block."""

    disables_thinking = True

    def render_message(self, message: Message, ctx: RenderContext) -> RenderedMessage:
        # With no user message the template writes no block on the produced turn, but the
        # generation prompt always does; the two cannot agree, so refuse to train it.
        if (
            message["role"] == "assistant"
            and ctx.is_last
            and message.get("content")
            and ctx.last_user_index < 0
        ):
            raise RendererError(
                "qwen3_disable_thinking: this conversation has no user message, so Qwen3's "
                "template writes no empty think block on the produced turn while the generation "
                "prompt does; add a user message or render with thinking on"
            )
        return super().render_message(message, ctx)

    def _get_generation_suffix(self, role: str, ctx: RenderContext) -> list[int]:
        text = ("\n" if ctx.idx > 0 else "") + f"<|im_start|>{role}\n<think>\n\n</think>\n\n"
        return list(self.tokenizer.encode(text, add_special_tokens=False))


class Qwen3InstructRenderer(Qwen3Renderer):
    """Qwen3 Instruct 2507: no `<think>` framing (ThinkingParts, if given, render as plain tags)."""

    frames_thinking = False

    @property
    def has_extension_property(self) -> bool:
        return True
