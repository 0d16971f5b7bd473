"""Thumbnails of the pictures transcripts name (kitchen/workflows/common/images.py): each one read
from the run directory and inlined in the page as a small PNG data URI, so the page stays one
self-contained file whatever size the pictures were."""

from __future__ import annotations

import base64
import io
import mimetypes
from dataclasses import dataclass, field
from pathlib import Path

SIZE = 96  # pixels on the longest side
# Without Pillow a picture is inlined as it is, when it is this small.
RAW_LIMIT = 64 * 1024


@dataclass
class Thumbnails:
    """Data URIs of the pictures of one run directory, by the path a record gives."""

    run_dir: Path
    _seen: dict[str, str | None] = field(default_factory=dict)

    def __call__(self, name: str) -> str | None:
        """The thumbnail of `name` (relative to the run directory, or absolute); None when the
        file is gone or is no picture."""
        if name not in self._seen:
            self._seen[name] = _thumbnail(self.run_dir / name)
        return self._seen[name]

    def all(self, names: object) -> list[str]:
        """The thumbnails of a record's "images" list (what is missing left out)."""
        if not isinstance(names, list):
            return []
        found = (self(str(n)) for n in names)
        return [uri for uri in found if uri is not None]


def _thumbnail(path: Path) -> str | None:
    if not path.is_file():
        return None
    data = path.read_bytes()
    try:
        from PIL import Image, UnidentifiedImageError
    except ModuleNotFoundError:
        mime = mimetypes.guess_type(path.name)[0] or ""
        if not mime.startswith("image/") or len(data) > RAW_LIMIT:
            return None
        return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"
    try:
        image = Image.open(io.BytesIO(data))
        image.thumbnail((SIZE, SIZE))
    except (UnidentifiedImageError, OSError):
        return None
    buffer = io.BytesIO()
    image.convert("RGB").save(buffer, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")
