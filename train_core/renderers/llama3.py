"""`llama3`: the Llama 3 Instruct header format (no tool calling)."""

from __future__ import annotations

import tinker

from train_core.renderers.base import Renderer
from train_core.renderers.content import ensure_text
from train_core.renderers.types import Message, RenderContext, RenderedMessage


class Llama3Renderer(Renderer):
    """`<|start_header_id|>{role}<|end_header_id|>\\n\\n{content}<|eot_id|>`, after one `<|begin_of_text|>`.

    Unlike Hugging Face's template, no "Cutting Knowledge Date" preamble is added to the system
    message. Tool calling is not offered: Llama 3 writes calls as bare JSON, which cannot be told
    apart from a reply that happens to be JSON.
    """

    @property
    def has_extension_property(self) -> bool:
        return True

    def render_message(self, message: Message, ctx: RenderContext) -> RenderedMessage:
        header = f"<|start_header_id|>{message['role']}<|end_header_id|>\n\n"
        output = ensure_text(message["content"]) + "<|eot_id|>"
        return RenderedMessage(
            header=tinker.EncodedTextChunk(tokens=self._encode(header)),
            output=[tinker.EncodedTextChunk(tokens=self._encode(output))],
        )

    def _encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    @property
    def _bos_tokens(self) -> list[int]:
        return self._encode("<|begin_of_text|>")

    @property
    def _end_message_token(self) -> int:
        (token,) = self._encode("<|eot_id|>")
        return token
