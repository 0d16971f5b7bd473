"""Qwen3-VL renderers: `qwen3_vl` (thinking) and `qwen3_vl_instruct`; the base of Qwen3.5+.

The turn layout is Qwen3's (`<|im_start|>{role}\\n...<|im_end|>`, tool results as user turns in
`<tool_response>`), but a message is rendered as a list of segments, text and images: images
are wrapped in `<|vision_start|>...<|vision_end|>`, adjacent text is merged and encoded as one
string (what `apply_chat_template` does, so BPE merges across part boundaries match), and
ThinkingParts are written inline. Unlike `qwen3`, special-token text inside content is not
escaped, and the produced turn's reasoning is not re-framed.

Subclasses (Qwen3.5, Qwen3.8, Nemotron 3) change the pieces through the hooks below; the
assembly in `render_message` is shared.
"""

from __future__ import annotations

from typing import Any

import tinker

from train_core.renderers.content import tool_call_blocks
from train_core.renderers.images import image_to_chunk, require_image_processor
from train_core.renderers.qwen3 import Qwen3Renderer
from train_core.renderers.types import (
    ImagePart,
    Message,
    RenderContext,
    RenderedMessage,
    RendererError,
    Role,
    TextPart,
    Tokenizer,
)

Segment = TextPart | ImagePart


def merge_text_segments(segments_S: list[Segment]) -> list[Segment]:
    """Adjacent text segments joined, so each run is tokenized as the template's one string."""
    merged: list[Segment] = []
    for seg in segments_S:
        if seg["type"] == "text" and merged and merged[-1]["type"] == "text":
            merged[-1] = TextPart(type="text", text=merged[-1]["text"] + seg["text"])
        else:
            merged.append(seg)
    return merged


def _text(text: str) -> TextPart:
    return TextPart(type="text", text=text)


class Qwen3VLRenderer(Qwen3Renderer):
    """Qwen3-VL; `thinking=False` is the Instruct model (no `<think>` framing when parsing).

    image_processor sizes image parts (see images.py); without one an image part is an error.
    """

    groups_tool_responses = False
    """Whether a run of tool results shares one user turn (the Qwen3.5-family templates)."""

    def __init__(
        self,
        tokenizer: Tokenizer,
        image_processor: Any = None,
        strip_thinking_from_history: bool = True,
        thinking: bool = True,
    ) -> None:
        super().__init__(tokenizer, strip_thinking_from_history=strip_thinking_from_history)
        self.image_processor = image_processor
        self._set_thinking(thinking)

    def _set_thinking(self, thinking: bool) -> None:
        """What `thinking=False` means for this format: here the Instruct model's unframed output."""
        self.frames_thinking = thinking

    # -- hooks the Qwen3.5-derived formats override -------------------------------------------

    def _thinking_text(self, thinking: str) -> str:
        return f"<think>{thinking}</think>"

    def _assistant_header_suffix(self, message: Message, ctx: RenderContext) -> str:
        """Text the template writes after an assistant header (an empty think block)."""
        return ""

    def _strips_thinking(self, message: Message, ctx: RenderContext) -> bool:
        # tinker-cookbook strips every assistant turn but the last, also tool-calling turns of
        # the produced turn that the template would keep; kept for token identity.
        return (
            self.strip_thinking_from_history and message["role"] == "assistant" and not ctx.is_last
        )

    def _wrap_images(self, segments_S: list[Segment]) -> list[Segment]:
        out: list[Segment] = []
        for seg in segments_S:
            if seg["type"] == "image":
                out += [_text("<|vision_start|>"), seg, _text("<|vision_end|>")]
            else:
                out.append(seg)
        return out

    def _tool_response_open_close(self) -> tuple[str, str]:
        return "<tool_response>\n", "\n</tool_response>"

    def _tool_response_separator(self) -> str:
        """What joins a grouped tool result to the previous one (instead of a header)."""
        return "\n"

    def _tool_calls_text(self, message: Message) -> str:
        return "\n" + tool_call_blocks(message.get("tool_calls", []))

    def _prompt_prefill_text(self, role: Role, ctx: RenderContext) -> str:
        """The generation prompt's text for the turn `role` (header and any prefill)."""
        return ("\n" if ctx.idx > 0 else "") + f"<|im_start|>{role}\n"

    def _prefill_in_header(self, message: Message, ctx: RenderContext) -> str:
        """The part of this message's header that the generation prompt writes (weight 0);
        the rest of the header then counts as output. Empty: the whole header is header."""
        return ""

    # -- assembly -------------------------------------------------------------------------------

    def _segments(self, message: Message, strip_thinking: bool) -> list[Segment]:
        content = message["content"]
        if isinstance(content, str):
            return [_text(content)]
        segments: list[Segment] = []
        for p in content:
            if p["type"] == "text" or p["type"] == "image":
                segments.append(p)
            elif p["type"] == "thinking" and not strip_thinking:
                segments.append(_text(self._thinking_text(p["thinking"])))
            elif p["type"] == "audio":
                raise RendererError(f"{type(self).__name__} cannot render audio parts")
        return segments

    def render_message(self, message: Message, ctx: RenderContext) -> RenderedMessage:
        role = "user" if message["role"] == "tool" else message["role"]
        is_tool = message["role"] == "tool"

        def neighbour_is_tool(neighbour: Message | None) -> bool:
            return (
                self.groups_tool_responses
                and is_tool
                and neighbour is not None
                and neighbour["role"] == "tool"
            )

        if neighbour_is_tool(ctx.prev_message):
            header = self._tool_response_separator()
        else:
            header = ("\n" if ctx.idx > 0 else "") + f"<|im_start|>{role}\n"
            if message["role"] == "assistant":
                header += self._assistant_header_suffix(message, ctx)

        segments_S = self._wrap_images(self._segments(message, self._strips_thinking(message, ctx)))
        if is_tool:
            opening, closing = self._tool_response_open_close()
            segments_S = [_text(opening), *segments_S, _text(closing)]
        if "tool_calls" in message:
            segments_S.append(_text(self._tool_calls_text(message)))
        if not neighbour_is_tool(ctx.next_message):  # a grouped run is closed by its last result
            segments_S.append(_text("<|im_end|>"))

        output: list[tinker.ModelInputChunk] = [
            self._encode_segment(seg) for seg in merge_text_segments(segments_S)
        ]
        prefill = self._prefill_in_header(message, ctx)
        if prefill and header.startswith(prefill):
            if header[len(prefill) :]:
                output.insert(0, self._encode_segment(_text(header[len(prefill) :])))
            header = prefill
        return RenderedMessage(
            header=tinker.EncodedTextChunk(
                tokens=self.tokenizer.encode(header, add_special_tokens=False)
            ),
            output=output,
        )

    def _encode_segment(self, seg: Segment) -> tinker.ModelInputChunk:
        if seg["type"] == "image":
            processor = require_image_processor(self.image_processor, type(self).__name__)
            return image_to_chunk(seg["image"], processor)
        return tinker.EncodedTextChunk(
            tokens=self.tokenizer.encode(seg["text"], add_special_tokens=False)
        )

    def _get_generation_suffix(self, role: Role, ctx: RenderContext) -> list[int]:
        text = self._prompt_prefill_text(role, ctx)
        return list(self.tokenizer.encode(text, add_special_tokens=False))
