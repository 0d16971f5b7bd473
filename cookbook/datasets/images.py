"""Image classification rows -> conversations, in tinker-cookbook 0.6.1's vlm_classifier format.

Row read: {"image": ..., "label": class name} (the bundled `shapes`, a local file, or a hub set
with an image column and a string label column; the columns are options). The image may be a
data URI, a local file path, a `file://` URL, a PIL image, or a hub image cell {"bytes": ...}.

Converted row: {"messages": [user: image + QUESTION, assistant: ANSWER_PREFIX + " " + class],
"label": class}, where the class name is cleaned as tinker-cookbook cleans it (`_ . -` become
spaces, lower case). The image is carried as a data URI, so a converted row is plain JSON (its
fingerprint is stable) and renders anywhere.
"""

from __future__ import annotations

import base64
import io
import mimetypes
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from cookbook.datasets.fields import bad_field, field_path, require
from kitchen.engine.errors import DataError

# tinker-cookbook 0.6.1's prompt and answer (recipes/vlm_classifier/data.py and eval.py): the
# evaluator prefills ANSWER_PREFIX and reads the class after it.
QUESTION = "What is the name of the subject in this photo?"
ANSWER_PREFIX = "The subject in this photo is:"
IMAGE_EXPECTED = 'a data URI, a local image path or file:// URL, or {"bytes": ...}'


def class_name(label: str) -> str:
    """tinker-cookbook's cleaned class name: `_ . -` become spaces, lower case."""
    return label.replace("_", " ").replace(".", " ").replace("-", " ").lower()


def image_data_uri(image: Any, where: str, key: str = "image", max_size: int | None = None) -> str:
    """The image as a data URI, checked to open. A PIL image, bytes of unknown type, or a picture
    larger than `max_size` on its longest side (resized as tinker-cookbook's resize_image does)
    is written as PNG."""
    if isinstance(image, str) and image.startswith("data:"):
        data, mime = _decode_data_uri(image, where, key), image[5:].partition(";")[0]
    elif isinstance(image, str):
        data, mime = _read_file(image, where, key)
    elif isinstance(image, Mapping) and isinstance(image.get("bytes"), bytes | bytearray):
        data, mime = bytes(image["bytes"]), ""
    elif type(image).__module__.startswith("PIL."):
        return _png_uri(image, max_size)
    else:
        raise bad_field(where, field_path(key), image, IMAGE_EXPECTED)
    pil = _open(data, where, key)  # a picture Pillow cannot read fails here, naming the row
    if mime.startswith("image/") and (max_size is None or max(pil.size) <= max_size):
        return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"
    return _png_uri(pil, max_size)


def _decode_data_uri(uri: str, where: str, key: str) -> bytes:
    header, _, payload = uri.partition(",")
    if not header.endswith(";base64"):
        raise bad_field(
            where, field_path(key), uri, "a base64 data URI (data:image/...;base64,...)"
        )
    try:
        return base64.b64decode(payload, validate=True)
    except ValueError:
        raise bad_field(where, field_path(key), uri, "valid base64 after the comma") from None


def _read_file(text: str, where: str, key: str) -> tuple[bytes, str]:
    parsed = urlparse(text)
    if parsed.scheme not in ("", "file"):
        raise bad_field(
            where, field_path(key), text, f"{IMAGE_EXPECTED} (remote URLs are not fetched)"
        )
    path = Path(unquote(parsed.path) if parsed.scheme == "file" else text).expanduser()
    if not path.is_file():
        raise DataError(f"{where}: field {field_path(key)} names {path}, which is not a file")
    return path.read_bytes(), mimetypes.guess_type(path.name)[0] or ""


def _open(data: bytes, where: str, key: str) -> Any:
    from PIL import Image, UnidentifiedImageError

    try:
        image = Image.open(io.BytesIO(data))
        image.load()
    except (UnidentifiedImageError, OSError) as e:
        raise DataError(
            f"{where}: field {field_path(key)} is not an image Pillow reads ({e})"
        ) from None
    return image


def _png_uri(image: Any, max_size: int | None) -> str:
    from PIL import Image

    if max_size is not None and max(image.size) > max_size:
        scale = max_size / max(image.size)
        size = (max(1, int(image.size[0] * scale)), max(1, int(image.size[1] * scale)))
        image = image.resize(size, Image.Resampling.LANCZOS)
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def image_label_row(
    row: Mapping[str, Any],
    where: str = "row",
    image_column: str = "image",
    label_column: str = "label",
    max_image_size: int | None = None,
) -> dict[str, Any]:
    """An image classification row -> {"messages", "label"} (see the module doc)."""
    label = require(row, label_column, where, "a class name")
    if not isinstance(label, str) or not label.strip():
        raise bad_field(where, field_path(label_column), label, "a class name (a non-empty string)")
    image = image_data_uri(
        require(row, image_column, where, IMAGE_EXPECTED), where, image_column, max_image_size
    )
    name = class_name(label.strip())
    return {
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "image", "image": image},
                    {"type": "text", "text": QUESTION},
                ],
            },
            {
                "role": "assistant",
                "content": [{"type": "text", "text": f"{ANSWER_PREFIX} {name}\n"}],
            },
        ],
        "label": name,
    }
