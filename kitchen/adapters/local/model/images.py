"""Image chunks -> what a vision-language model reads: image placeholder tokens where the chunk
stands, the model's own image processor's pixel values, and multimodal RoPE positions.

A `ModelInput` with an `ImageChunk` (bytes + format) or an `ImageAssetPointerChunk` (a local file)
is expanded here: the image is decoded with PIL, the model's image processor (the one saved with
the model) resizes and patches it, and the chunk becomes `n` copies of the model's image token,
`n` = the processor's patch grid / merge_size^2. A chunk's `expected_tokens`, when set, must equal
that `n`: the loss inputs of a datum are laid out by it, so a mismatch is refused, not guessed.

Positions are Qwen-VL's M-RoPE (time, height, width), computed on the host (`mrope_positions`,
checked against the model's own `get_rope_index` in the tests): text advances all three by one
per token; an image's tokens take its grid's rows and columns from where the image starts, and
the text after it resumes at start + max(rows, columns).
"""

from __future__ import annotations

import functools
import hashlib
import io
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from tinker import types

from kitchen.engine.errors import BackendError

# Model types whose image path the engine runs (their forward takes pixel_values, image_grid_thw
# and mm_token_type_ids, and their positions are mrope_positions').
VISION_MODEL_TYPES = frozenset({"qwen3_vl", "qwen3_vl_moe"})
# Refused before decoding: an image file larger than this, or more pixels than this once decoded
# (the processor scales every image down to its own maximum, so a larger one only costs time).
MAX_IMAGE_BYTES = 32 * 1024 * 1024
MAX_IMAGE_PIXELS = 8192 * 8192
# Processed images kept by content hash: the same image is scored, trained on and sampled from
# many times in a run (a datum's reference pass, its training pass, the next epoch).
_CACHE_SIZE = 512


@dataclass(frozen=True)
class Image:
    """One processed image: its patches [P, D], patch grid (t, h, w) and token count."""

    pixel_values: np.ndarray
    grid_thw: tuple[int, int, int]
    tokens: int


@dataclass(frozen=True)
class Expanded:
    """A model input as the model reads it: token ids (image chunks as runs of the image token)
    and its images in order, each with the position of its first token."""

    tokens: list[int]
    images: list[tuple[int, Image]]


class Vision:
    """A vision-language model's image side: its image processor and placeholder token."""

    def __init__(
        self,
        model_name: str,
        processor: Any,
        image_token_id: int,
        merge_size: int,
        placeholder_ids: frozenset[int],
    ):
        self.model_name = model_name
        self.processor = processor
        self.image_token_id = image_token_id
        self.merge_size = merge_size
        # Token ids that mark where image (or video) features go: only an image chunk may stand
        # for them, and a sample never holds one (see decode_batch.SampleJob.banned).
        self.placeholder_ids = placeholder_ids
        self._cache: OrderedDict[str, Image] = OrderedDict()

    def image(self, data: bytes, fmt: str, where: str) -> Image:
        """`data` (a `fmt` image) processed, or a BackendError naming `where` and the reason."""
        if fmt not in ("png", "jpeg"):
            raise BackendError(f"{where}: image format {fmt!r} is not png or jpeg")
        if len(data) > MAX_IMAGE_BYTES:
            raise BackendError(
                f"{where}: the image has {len(data)} bytes; at most {MAX_IMAGE_BYTES} are taken"
            )
        key = hashlib.sha256(data).hexdigest()
        cached = self._cache.get(key)
        if cached is not None:
            self._cache.move_to_end(key)
            return cached
        picture = _decode(data, fmt, where)
        out = self.processor(images=[picture], return_tensors="np")
        grid = tuple(int(x) for x in np.asarray(out["image_grid_thw"])[0])
        t, h, w = grid
        image = Image(
            pixel_values=np.asarray(out["pixel_values"], dtype=np.float32),
            grid_thw=(t, h, w),
            tokens=t * h * w // self.merge_size**2,
        )
        self._cache[key] = image
        if len(self._cache) > _CACHE_SIZE:
            self._cache.popitem(last=False)
        return image

    def expand(self, model_input: types.ModelInput, where: str) -> Expanded:
        """`model_input` with every image chunk replaced by its image tokens (see the module doc)."""
        tokens: list[int] = []
        images: list[tuple[int, Image]] = []
        for c, chunk in enumerate(model_input.chunks):
            if isinstance(chunk, types.EncodedTextChunk):
                if not self.placeholder_ids.isdisjoint(chunk.tokens):
                    token = next(t for t in chunk.tokens if t in self.placeholder_ids)
                    raise BackendError(
                        f"{where}: chunk {c} (encoded_text) holds token id {token}, "
                        f"{self.model_name}'s image placeholder, which only an image chunk may "
                        "stand for"
                    )
                tokens += chunk.tokens
                continue
            at = f"{where}: chunk {c} ({chunk.type})"
            if isinstance(chunk, types.ImageChunk):
                image = self.image(chunk.data, chunk.format, at)
            elif isinstance(chunk, types.ImageAssetPointerChunk):
                image = self.image(_read_local(chunk.location, at), chunk.format, at)
            else:
                raise BackendError(f"{at}: {self.model_name} takes text and image chunks only")
            expected = chunk.expected_tokens
            if expected is not None and expected != image.tokens:
                raise BackendError(
                    f"{at}: expected_tokens is {expected}, but {self.model_name}'s image processor "
                    f"makes {image.tokens} tokens of this image (grid {list(image.grid_thw)})"
                )
            images.append((len(tokens), image))
            tokens += [self.image_token_id] * image.tokens
        return Expanded(tokens, images)


def vision_of(model: Any) -> Vision | None:
    """The image side of `model` (a transformers model, possibly under peft), None for a text model.
    A vision-language model of a family the engine does not run images for is refused."""
    config = model.config
    if getattr(config, "vision_config", None) is None:
        return None
    path = str(getattr(config, "_name_or_path", "") or "")
    video = getattr(config, "video_token_id", None)
    placeholders = frozenset(
        {int(config.image_token_id)} | ({int(video)} if video is not None else set())
    )
    return _vision(path, config.model_type, int(config.image_token_id), placeholders)


@functools.lru_cache(maxsize=8)
def _vision(
    path: str, model_type: str, image_token_id: int, placeholder_ids: frozenset[int]
) -> Vision:
    if model_type not in VISION_MODEL_TYPES:
        raise BackendError(
            f"model {path}: images on a {model_type} model are not supported; the local engine "
            f"runs images for {', '.join(sorted(VISION_MODEL_TYPES))}"
        )
    from transformers import AutoImageProcessor
    from transformers.utils import logging as hf_logging

    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # "torchvision missing, using the PIL processor" is expected
    try:
        processor = AutoImageProcessor.from_pretrained(path, backend="pil")
    except Exception as e:
        raise BackendError(f"model {path}: its image processor could not be loaded: {e}") from e
    finally:
        hf_logging.set_verbosity(verbosity)
    merge = int(processor.merge_size)
    return Vision(Path(path).name, processor, image_token_id, merge, placeholder_ids)


def text_only(model_input: types.ModelInput, model_name: str, where: str) -> list[int]:
    """The token ids of a text-only input; an image sent to a text model is refused in one line."""
    for c, chunk in enumerate(model_input.chunks):
        if not isinstance(chunk, types.EncodedTextChunk):
            raise BackendError(
                f"{where}: chunk {c} is an {chunk.type} chunk, but {model_name} is a text-only "
                "model; send token chunks, or use a vision-language model (e.g. kitchen/tiny-qwen3-vl)"
            )
    return model_input.to_ints()


def mrope_positions(expanded: Expanded, merge_size: int) -> np.ndarray:
    """M-RoPE position ids [3, T] (time, height, width) of `expanded` (see the module doc)."""
    n = len(expanded.tokens)
    out = np.zeros((3, n), dtype=np.int64)
    at = 0  # next token
    pos = 0  # next position
    for start, image in [*expanded.images, (n, None)]:
        out[:, at:start] = np.arange(pos, pos + start - at)
        pos += start - at
        if image is None:
            break
        _, h, w = image.grid_thw
        rows, cols = h // merge_size, w // merge_size
        grid = slice(start, start + rows * cols)
        out[0, grid] = pos
        out[1, grid] = pos + np.repeat(np.arange(rows), cols)
        out[2, grid] = pos + np.tile(np.arange(cols), rows)
        pos += max(rows, cols)
        at = start + rows * cols
    return out


def _decode(data: bytes, fmt: str, where: str) -> Any:
    from PIL import Image as PILImage

    try:
        with PILImage.open(io.BytesIO(data), formats=[fmt.upper()]) as picture:
            if picture.width * picture.height > MAX_IMAGE_PIXELS:
                raise BackendError(
                    f"{where}: the image is {picture.width}x{picture.height} pixels; at most "
                    f"{MAX_IMAGE_PIXELS} pixels are taken"
                )
            return picture.convert("RGB")
    except BackendError:
        raise
    except Exception as e:  # PIL raises several kinds for bytes that are not an image
        raise BackendError(f"{where}: the bytes are not a readable {fmt} image ({e})") from e


def _read_local(location: str, where: str) -> bytes:
    """The bytes of a local image file (`location` a path or a file:// URL)."""
    path = Path(location.removeprefix("file://")).expanduser()
    if "://" in location and not location.startswith("file://"):
        raise BackendError(f"{where}: location {location!r} is not a local file; send the bytes")
    try:
        size = path.stat().st_size
        if size > MAX_IMAGE_BYTES:
            raise BackendError(
                f"{where}: {path} has {size} bytes; at most {MAX_IMAGE_BYTES} are taken"
            )
        return path.read_bytes()
    except OSError as e:
        raise BackendError(f"{where}: image file {path} cannot be read ({e.strerror})") from e
