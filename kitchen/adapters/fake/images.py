"""The fake backend's image processor: Qwen-VL's token count of an image, in pure Python.

It counts as the tiny VLM's own processor does (Qwen2-VL's `smart_resize` to multiples of
patch_size x merge_size within [min_pixels, max_pixels], then one token per merge_size^2
patches), with the tiny VLM's settings, so a renderer sizes image chunks on the fake exactly as
it does on `kitchen/tiny-qwen3-vl`; a test compares the two. The fake backend refuses an image
chunk whose `expected_tokens` disagrees, as the engine does.
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass
from typing import Any

from tinker import types

from kitchen.adapters.local.model.tiny import TINY_IMAGE_PROCESSOR
from kitchen.engine.errors import BackendError

_TINY = TINY_IMAGE_PROCESSOR


@dataclass(frozen=True)
class FakeImageProcessor:
    """The part of a Qwen-VL image processor a renderer calls (`get_number_of_image_patches`,
    `merge_size`), with the tiny VLM's patching: 16-pixel patches, 2x2 merge, 32^2..128^2 pixels."""

    patch_size: int = _TINY["patch_size"]
    merge_size: int = _TINY["merge_size"]
    min_pixels: int = _TINY["size"]["shortest_edge"]
    max_pixels: int = _TINY["size"]["longest_edge"]

    def resized(self, height: int, width: int) -> tuple[int, int]:
        """Qwen2-VL's smart_resize: the size the processor scales an image to."""
        factor = self.patch_size * self.merge_size
        if max(height, width) / min(height, width) > 200:
            raise BackendError(f"an image of {width}x{height}: aspect ratio over 200")
        h, w = round(height / factor) * factor, round(width / factor) * factor
        if h * w > self.max_pixels:
            beta = math.sqrt(height * width / self.max_pixels)
            h = max(factor, math.floor(height / beta / factor) * factor)
            w = max(factor, math.floor(width / beta / factor) * factor)
        elif h * w < self.min_pixels:
            beta = math.sqrt(self.min_pixels / (height * width))
            h = math.ceil(height * beta / factor) * factor
            w = math.ceil(width * beta / factor) * factor
        return h, w

    def get_number_of_image_patches(
        self, height: int, width: int, images_kwargs: dict[str, Any] | None = None
    ) -> int:
        h, w = self.resized(height, width)
        return (h // self.patch_size) * (w // self.patch_size)

    def tokens(self, chunk: types.ImageChunk, where: str) -> int:
        """How many tokens the model reads for `chunk`; a BackendError if it is no picture."""
        from PIL import Image, UnidentifiedImageError

        try:
            width, height = Image.open(io.BytesIO(chunk.data)).size
        except (UnidentifiedImageError, OSError) as e:
            raise BackendError(f"{where}: the image does not decode ({e})") from None
        return self.get_number_of_image_patches(height, width) // self.merge_size**2
