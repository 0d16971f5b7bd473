"""Fixtures for the vision tests: a private model cache, one local engine, the tiny VLM's images."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import local_backend

VLM = "kitchen/tiny-qwen3-vl"


@pytest.fixture(scope="package", autouse=True)
def private_model_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    cache = tmp_path_factory.mktemp("kitchen-cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KITCHEN_CACHE", str(cache))
        yield cache


@pytest.fixture(scope="package")
def backend(tmp_path_factory: pytest.TempPathFactory, private_model_cache: Path) -> Iterator[Any]:
    with local_backend(tmp_path_factory.mktemp("run")) as engine:
        yield engine


def picture(
    color: tuple[int, int, int], size: tuple[int, int] = (64, 48), fmt: str = "PNG"
) -> bytes:
    """A plain image of `color` as `fmt` bytes, with a darker square so rows and columns differ."""
    from PIL import Image, ImageDraw

    image = Image.new("RGB", size, color)
    ImageDraw.Draw(image).rectangle((4, 4, size[0] // 2, size[1] // 2), fill=(20, 20, 20))
    buffer = io.BytesIO()
    image.save(buffer, format=fmt)
    return buffer.getvalue()
