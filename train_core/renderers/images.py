"""Image content parts -> `tinker.types.ImageChunk` for the vision-language renderers.

An image chunk carries JPEG bytes and the number of tokens the model's image processor expands
it to; the renderer needs that count to place weights. Without a processor the count is unknown,
so rendering an image is refused with an error that says what to pass.
"""

from __future__ import annotations

import base64
import io
from typing import Any

import tinker

from train_core.renderers.types import RendererError


def require_image_processor(image_processor: Any, renderer_name: str) -> Any:
    """The processor, or a RendererError saying the conversation needs one."""
    if image_processor is None:
        raise RendererError(
            f"{renderer_name}: the conversation has an image part, but no image processor was "
            "given; pass image_processor= to get_renderer (e.g. the model's "
            "AutoImageProcessor) or send text-only content"
        )
    return image_processor


def _load_image(image: Any) -> Any:
    from PIL import Image  # imported here: text-only renderers never need Pillow

    if isinstance(image, Image.Image):
        return image
    if isinstance(image, str) and image.startswith("data:"):
        _, _, payload = image.partition(",")
        return Image.open(io.BytesIO(base64.b64decode(payload)))
    if isinstance(image, str):
        import urllib.request

        with urllib.request.urlopen(image) as response:
            return Image.open(io.BytesIO(response.read()))
    raise RendererError(
        f"an image part must hold a PIL image, a URL or a data URI, got {type(image).__name__}"
    )


def image_to_chunk(image: Any, image_processor: Any) -> tinker.types.ImageChunk:
    """The image as a JPEG ImageChunk sized by `image_processor` (Qwen-VL style patch counts)."""
    pil_image = _load_image(image)
    if pil_image.mode in ("RGBA", "LA", "P"):  # JPEG has no alpha or palette
        pil_image = pil_image.convert("RGB")
    buffer = io.BytesIO()
    pil_image.save(buffer, format="JPEG")
    if not hasattr(image_processor, "get_number_of_image_patches"):
        raise RendererError(
            f"image processor {type(image_processor).__name__} cannot count image tokens "
            "(it has no get_number_of_image_patches)"
        )
    width, height = pil_image.size
    patches = image_processor.get_number_of_image_patches(height, width, images_kwargs={})
    return tinker.types.ImageChunk(
        data=buffer.getvalue(),
        format="jpeg",
        expected_tokens=patches // image_processor.merge_size**2,
    )
