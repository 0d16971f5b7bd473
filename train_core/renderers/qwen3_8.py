"""Qwen3.8 renderers: `qwen3_8_{xhigh,medium,low}_reasoning` and `qwen3_8_disable_thinking`.

Qwen3.5's format (XML tool calls, vision tokens) with the Qwen3.8 template's changes:
- a reasoning effort: xhigh (the template's default) and low put an instruction sentence
  first in the system message (adding one when there is none); medium adds nothing; with
  thinking off there is no instruction;
- reasoning is kept in history by default (`preserve_thinking`), and every assistant turn that
  did not reason gets an empty think block wherever it sits;
- an empty system message renders nothing; tool-call arguments are written with `|tojson`.
"""

from __future__ import annotations

import json
from typing import Any, Literal, cast

from train_core.renderers.qwen3_5 import Qwen3_5Renderer
from train_core.renderers.types import (
    Message,
    RenderContext,
    RendererError,
    TextPart,
    Tokenizer,
)

ReasoningEffort = Literal["xhigh", "medium", "low", "none"]

REASONING_EFFORT_INSTRUCTIONS: dict[str, str] = {
    "xhigh": (
        "Reasoning effort is set to xhigh. Please think carefully through the task, validate "
        "key assumptions, consider plausible alternatives, and prioritize correctness, "
        "consistency, and clarity in the final answer."
    ),
    "medium": "",
    "low": (
        "Reasoning effort is set to low. Keep your thinking brief and focused, moving directly "
        "to the conclusion without unnecessary elaboration."
    ),
    "none": "",  # thinking off: the template writes no instruction
}


class Qwen3_8Renderer(Qwen3_5Renderer):
    """Qwen3.8; reasoning_effort="none" turns thinking off (the prompt closes the think block)."""

    def __init__(
        self,
        tokenizer: Tokenizer,
        image_processor: Any = None,
        reasoning_effort: ReasoningEffort = "xhigh",
        strip_thinking_from_history: bool = False,
    ) -> None:
        if reasoning_effort not in REASONING_EFFORT_INSTRUCTIONS:
            raise RendererError(
                f"unknown Qwen3.8 reasoning effort {reasoning_effort!r}; expected one of "
                f"{', '.join(REASONING_EFFORT_INSTRUCTIONS)}"
            )
        super().__init__(
            tokenizer,
            image_processor,
            strip_thinking_from_history,
            thinking=reasoning_effort != "none",
        )
        self.reasoning_effort = reasoning_effort

    def _prepare_conversation(self, messages: list[Message]) -> list[Message]:
        """The conversation with the template's system-message handling applied.

        Idempotent, because build_supervised_example rebuilds the prompt from its own (already
        handled) messages. A synthetic system message copies `trainable=False` when the
        conversation uses per-message flags, which CUSTOMIZED requires on every message.
        """
        instruction = REASONING_EFFORT_INSTRUCTIONS[self.reasoning_effort]
        if not messages or messages[0]["role"] != "system":
            if not instruction:
                return list(messages)
            synthetic = Message(role="system", content=instruction)
            if any("trainable" in m for m in messages):
                synthetic["trainable"] = False
            return [synthetic, *messages]
        first, rest = messages[0], list(messages[1:])
        content = first["content"]
        if not isinstance(content, str) and any(p["type"] != "text" for p in content):
            # Not text only (the template refuses that): the instruction goes in front as is.
            starts = content[0]["type"] == "text" and content[0]["text"].startswith(instruction)
            if not instruction or starts:
                return list(messages)
            parts = [TextPart(type="text", text=f"{instruction}\n\n"), *content]
            return [cast(Message, {**first, "content": parts}), *rest]
        # Text parts are joined and trimmed by the template, like a string.
        text = content if isinstance(content, str) else "".join(p["text"] for p in content)  # type: ignore[typeddict-item]
        text = text.strip()
        if not text and not instruction:
            return rest
        if instruction and not (text == instruction or text.startswith(f"{instruction}\n\n")):
            text = f"{instruction}\n\n{text}" if text else instruction
        return [cast(Message, {**first, "content": text}), *rest]

    def _format_argument(self, value: object) -> str:
        return value if isinstance(value, str) else json.dumps(value)

    def _strips_thinking(self, message: Message, ctx: RenderContext) -> bool:
        # Unlike 3.5, only turns up to the last user message lose their reasoning.
        return (
            self.strip_thinking_from_history
            and message["role"] == "assistant"
            and ctx.idx <= ctx.last_user_index
        )

    def _assistant_header_suffix(self, message: Message, ctx: RenderContext) -> str:
        # Only ThinkingParts count: the 3.8 template reads reasoning_content, not inline tags.
        if self.strip_thinking_from_history and ctx.idx <= ctx.last_user_index:
            return ""
        content = message["content"]
        if isinstance(content, list) and any(p["type"] == "thinking" for p in content):
            return ""
        return "<think>\n\n</think>\n\n"
