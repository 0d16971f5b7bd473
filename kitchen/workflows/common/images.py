"""Pictures in transcripts: each image of a prompt is saved once in the run directory, as
`images/<sha256 of its bytes, 16 hex digits>.<format>`, and a record names it by that path
relative to the run directory, so rollout and sample records stay small (never base64 in JSONL)
and the same picture seen at every step is one file. The prompt's text keeps IMAGE_MARKER where
each image stood; `kitchen report` shows the files as thumbnails."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the SDK's types load torch; `kitchen play`'s module is imported by --help
    from tinker import types

IMAGE_MARKER = "<image>"
IMAGES_DIR = "images"


def save_image(run_dir: Path, data: bytes, fmt: str) -> str:
    """`data` written once under run_dir/images/; its path relative to run_dir."""
    name = f"{IMAGES_DIR}/{hashlib.sha256(data).hexdigest()[:16]}.{fmt}"
    path = run_dir / name
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(data)
        tmp.replace(path)
    return name


def readable_input(
    tokenizer: Any, model_input: types.ModelInput, run_dir: Path | None
) -> tuple[str, list[str]]:
    """The model input as text, IMAGE_MARKER at each image, and the images' paths relative to
    `run_dir` (saved there; none without a run directory). A pointer chunk names its own file."""
    from tinker import types

    text: list[str] = []
    images: list[str] = []
    pending: list[int] = []
    for chunk in model_input.chunks:
        if isinstance(chunk, types.EncodedTextChunk):
            pending += chunk.tokens  # decoded together: BPE pieces join across chunk edges
            continue
        text.append(str(tokenizer.decode(pending)) if pending else "")
        pending = []
        text.append(IMAGE_MARKER)
        if isinstance(chunk, types.ImageChunk) and run_dir is not None:
            images.append(save_image(run_dir, chunk.data, chunk.format))
        elif isinstance(chunk, types.ImageAssetPointerChunk):
            images.append(chunk.location)
    if pending:
        text.append(str(tokenizer.decode(pending)))
    return "".join(text), images
