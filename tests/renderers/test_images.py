"""Vision-language renderers refuse image parts without an image processor, and size them with one."""

from __future__ import annotations

from typing import Any

import pytest
import tinker

from train_core.renderers import Message, RendererError, get_renderer


def _with_image(image: Any) -> list[Message]:
    return [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is this?"},
                {"type": "image", "image": image},
            ],
        }
    ]


def test_image_without_processor_is_a_clear_error(test_tokenizer: Any) -> None:
    renderer = get_renderer("qwen3_vl", test_tokenizer)
    with pytest.raises(RendererError, match="no image processor was given; pass image_processor="):
        renderer.build_generation_prompt(_with_image("data:image/png;base64,AAAA"))


class _PatchCounter:
    """The one method of a Qwen-VL image processor the renderer calls: 16x16 patches, 2x2 merged."""

    merge_size = 2

    def get_number_of_image_patches(self, height: int, width: int, images_kwargs: Any) -> int:
        return (height // 16) * (width // 16)


def test_image_with_processor_becomes_an_image_chunk_between_vision_tokens(
    test_tokenizer: Any,
) -> None:
    from PIL import Image

    renderer = get_renderer("qwen3_vl", test_tokenizer, image_processor=_PatchCounter())
    prompt = renderer.build_generation_prompt(_with_image(Image.new("RGBA", (64, 32))))
    images = [c for c in prompt.chunks if isinstance(c, tinker.types.ImageChunk)]
    assert len(images) == 1 and images[0].expected_tokens == (2 * 4) // 4
    before = prompt.chunks[prompt.chunks.index(images[0]) - 1]
    assert isinstance(before, tinker.EncodedTextChunk)
    assert test_tokenizer.decode(before.tokens).endswith("<|vision_start|>")


def test_kimi_k25_puts_an_image_between_media_markers(test_tokenizer: Any) -> None:
    from PIL import Image

    renderer = get_renderer("kimi_k25", test_tokenizer, image_processor=_PatchCounter())
    prompt = renderer.build_generation_prompt(_with_image(Image.new("RGB", (32, 32))))
    at = next(i for i, c in enumerate(prompt.chunks) if isinstance(c, tinker.types.ImageChunk))
    before, after = prompt.chunks[at - 1], prompt.chunks[at + 1]
    assert isinstance(before, tinker.EncodedTextChunk) and isinstance(
        after, tinker.EncodedTextChunk
    )
    assert test_tokenizer.decode(before.tokens) == "<|media_begin|>image<|media_content|>"
    assert test_tokenizer.decode(after.tokens) == "<|media_end|>\n"
    assert test_tokenizer.decode(prompt.chunks[at + 2].tokens) == "<|im_end|>"
