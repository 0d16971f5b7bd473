"""`kimi_k25` and `kimi_k26` (with `_disable_thinking`, `_preserve_thinking`): Kimi K2.5 / K2.6.

The K2 format (see kimi_k2.py) with three changes from Moonshot's K2.5 template:

    <|im_assistant|>assistant<|im_middle|><think>            generation prompt, thinking on
    <|im_assistant|>assistant<|im_middle|><think></think>    generation prompt, thinking off

tools are declared as TypeScript types (kimi_tool_declarations.py) instead of JSON, and user
messages may hold images between `<|media_begin|>image<|media_content|>` and `<|media_end|>`.
K2.6's template renders the same tokens as K2.5's; its `preserve_thinking` option keeps every
earlier turn's reasoning, which is `strip_thinking_from_history=False` here.
"""

from __future__ import annotations

from typing import Any

import tinker

from train_core.renderers.base import single_token
from train_core.renderers.images import image_to_chunk, require_image_processor
from train_core.renderers.kimi_k2 import KimiK2Renderer
from train_core.renderers.kimi_tool_declarations import encode_tools_typescript
from train_core.renderers.types import ContentPart, Message, RendererError, Role, Tokenizer

_IMAGE_OPEN = "<|media_begin|>image<|media_content|>"
_IMAGE_CLOSE = "<|media_end|>\n"


class KimiK25Renderer(KimiK2Renderer):
    """Kimi K2.5 / K2.6. thinking=False closes the think block in the generation prompt;
    strip_thinking_from_history=False keeps earlier reasoning (K2.6's preserve_thinking)."""

    def __init__(
        self,
        tokenizer: Tokenizer,
        image_processor: Any = None,
        *,
        thinking: bool = True,
        strip_thinking_from_history: bool = True,
    ) -> None:
        super().__init__(tokenizer, strip_thinking_from_history=strip_thinking_from_history)
        self.image_processor = image_processor
        self.thinking = thinking
        self.disables_thinking = not thinking
        self._think_open = single_token(tokenizer, "<think>")
        self._think_close = single_token(tokenizer, "</think>")

    def build_generation_prompt(
        self, messages: list[Message], role: Role = "assistant", prefill: str | None = None
    ) -> tinker.ModelInput:
        # The think block is opened (or opened and closed) as a prefill, before the caller's own.
        think = "<think>" if self.thinking else "<think></think>"
        return super().build_generation_prompt(messages, role=role, prefill=think + (prefill or ""))

    def _normalize_response_tokens(self, response: list[int]) -> list[int]:
        """Put back the prefilled `<think>` when the sample closes a block it did not open."""
        if response and response[0] != self._think_open and self._think_close in response:
            return [self._think_open, *response]
        return response

    def _render_parts(self, parts: list[ContentPart]) -> list[tinker.ModelInputChunk]:
        chunks: list[tinker.ModelInputChunk] = []
        for part in parts:
            if part["type"] == "text":
                chunks.append(tinker.EncodedTextChunk(tokens=self._encode(part["text"])))
            elif part["type"] == "image":
                processor = require_image_processor(self.image_processor, type(self).__name__)
                chunks.append(tinker.EncodedTextChunk(tokens=self._encode(_IMAGE_OPEN)))
                chunks.append(image_to_chunk(part["image"], processor))
                chunks.append(tinker.EncodedTextChunk(tokens=self._encode(_IMAGE_CLOSE)))
            else:
                raise RendererError(
                    f"Kimi K2.5 renders text and image parts outside assistant messages, "
                    f"got a {part['type']!r} part"
                )
        return chunks

    def _declare_tools(self, tools: list[dict[str, Any]]) -> str:
        return encode_tools_typescript(tools)
