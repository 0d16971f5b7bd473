"""Image token counts and positions match the model's own processor, chat template and RoPE index."""

from __future__ import annotations

import io
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from tests.helpers import TINY_VLM as VLM
from tests.helpers import picture
from train_core.renderers import get_renderer


@pytest.fixture(scope="module")
def host(backend: Any) -> Any:
    return backend.shared_host(VLM)


def _messages(images: list[Any]) -> list[dict[str, Any]]:
    first, second = images
    return [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Compare "},
                {"type": "image", "image": first},
                {"type": "text", "text": " with "},
                {"type": "image", "image": second},
                {"type": "text", "text": ". Which is redder?"},
            ],
        },
        {"role": "assistant", "content": "The first."},
        {"role": "user", "content": "Sure?"},
    ]


def _images() -> list[Any]:
    from PIL import Image

    # JPEG first, so the renderer's JPEG re-encoding gives the processor the same pixels.
    sizes = [(64, 48), (128, 96)]
    colors = [(200, 10, 10), (10, 10, 200)]
    return [
        Image.open(io.BytesIO(picture(c, s, "JPEG"))) for c, s in zip(colors, sizes, strict=True)
    ]


def test_rendered_image_tokens_equal_the_processor_and_chat_template(host: Any) -> None:
    """What the processor's apply_chat_template makes: the template's text with each image's
    `<|image_pad|>` repeated grid/merge^2 times (Qwen3VLProcessor.replace_image_token), tokenized."""
    from transformers.models.qwen3_vl.processing_qwen3_vl import Qwen3VLProcessor

    from kitchen.adapters.local.model.images import vision_of

    vision = vision_of(host.base)
    assert vision is not None
    tokenizer = host.tokenizer
    images = _images()
    messages = _messages(images)
    renderer = get_renderer("qwen3_vl_instruct", tokenizer, vision.processor)
    prompt = renderer.build_generation_prompt(messages)  # type: ignore[arg-type]
    expanded = vision.expand(prompt, "prompt")

    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    grids = vision.processor(images=[im.convert("RGB") for im in images], return_tensors="np")
    processor = SimpleNamespace(image_processor=vision.processor, image_token="<|image_pad|>")
    parts = text.split("<|image_pad|>")
    assert len(parts) == 3
    for i in range(2):
        pads = Qwen3VLProcessor.replace_image_token(processor, dict(grids), i)  # type: ignore[arg-type]
        parts[i] += pads
    expected = tokenizer.encode("".join(parts), add_special_tokens=False)

    assert expanded.tokens == expected
    counts = [image.tokens for _, image in expanded.images]
    assert counts == [c.expected_tokens for c in prompt.chunks if c.type == "image"]
    assert (
        counts == [int(g.prod()) // 4 for g in grids["image_grid_thw"]] and counts[0] != counts[1]
    )
    starts = [start for start, _ in expanded.images]
    image_id = vision.image_token_id
    assert [
        i
        for i, t in enumerate(expected)
        if t == image_id and (i == 0 or expected[i - 1] != image_id)
    ] == starts
    # The pixels the model sees are the processor's of the chunk's own bytes (the renderer sends
    # a JPEG re-encoding of the picture, so the original's pixels differ slightly).
    from PIL import Image

    sent = [Image.open(io.BytesIO(c.data)) for c in prompt.chunks if c.type == "image"]  # type: ignore[union-attr]
    np.testing.assert_array_equal(
        np.concatenate([image.pixel_values for _, image in expanded.images]),
        vision.processor(images=[im.convert("RGB") for im in sent], return_tensors="np")[
            "pixel_values"
        ],
    )


def test_mrope_positions_equal_the_models_rope_index(host: Any) -> None:
    import torch

    from kitchen.adapters.local.model.images import mrope_positions, vision_of

    vision = vision_of(host.base)
    assert vision is not None
    renderer = get_renderer("qwen3_vl_instruct", host.tokenizer, vision.processor)
    expanded = vision.expand(renderer.build_generation_prompt(_messages(_images())), "prompt")  # type: ignore[arg-type]
    ids = torch.tensor([expanded.tokens], device="cpu")
    kind = (ids == vision.image_token_id).int()
    grids = torch.tensor([image.grid_thw for _, image in expanded.images], device="cpu")
    theirs, _ = host.base.model.get_rope_index(ids, kind, image_grid_thw=grids)
    np.testing.assert_array_equal(
        mrope_positions(expanded, vision.merge_size), theirs[:, 0].cpu().numpy()
    )
