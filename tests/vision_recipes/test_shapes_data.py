"""The bundled `shapes` pictures and their conversion to tinker-cookbook's classifier format."""

from __future__ import annotations

import base64
import io
import json
from collections import Counter
from pathlib import Path

import pytest
from PIL import Image

from cookbook.datasets.images import ANSWER_PREFIX, QUESTION, image_label_row
from kitchen.adapters.datasets import HFDatasetStore
from kitchen.adapters.fake.images import FakeImageProcessor
from kitchen.engine.errors import DataError


@pytest.fixture(scope="module")
def splits() -> dict[str, list[dict[str, str]]]:
    store = HFDatasetStore()
    return {split: list(store.load("bundled:shapes", split)) for split in ("train", "test")}


def _picture(row: dict[str, str]) -> Image.Image:
    return Image.open(io.BytesIO(base64.b64decode(row["image"].partition(",")[2])))


def test_every_class_has_the_same_count_and_held_out_pictures_are_new(splits) -> None:
    train, test = splits["train"], splits["test"]
    assert Counter((r["colour"], r["shape"]) for r in train) == {
        (c, s): 20
        for c in ("red", "green", "blue", "yellow")
        for s in ("circle", "square", "triangle")
    }
    assert set(Counter(r["label"] for r in test).values()) == {15}
    assert all(r["label"] == r["colour"] for r in train + test)
    assert not {r["image"] for r in train} & {r["image"] for r in test}
    assert {_picture(r).size for r in train + test} == {(64, 64)}


def test_the_shape_is_drawn_in_its_colour(splits) -> None:
    """The label is in the picture: the most common non-background pixel is nearest its colour."""
    reference = {
        "red": (220, 40, 40),
        "green": (40, 170, 60),
        "blue": (40, 80, 220),
        "yellow": (235, 200, 30),
    }
    for row in splits["test"]:
        pixels = Counter(_picture(row).convert("RGB").getdata())
        corner = _picture(row).convert("RGB").getpixel((0, 0))
        fill = next(p for p, _ in pixels.most_common() if p != corner)
        nearest = min(
            reference,
            key=lambda c: sum((a - b) ** 2 for a, b in zip(reference[c], fill, strict=True)),
        )
        assert nearest == row["colour"]


def test_a_row_becomes_the_cookbook_prompt_and_answer(splits) -> None:
    row = splits["train"][0]
    out = image_label_row(row, "row 0")
    user, assistant = out["messages"]
    assert user["content"][0] == {"type": "image", "image": row["image"]}
    assert user["content"][1] == {"type": "text", "text": QUESTION}
    assert assistant["content"][0]["text"] == f"{ANSWER_PREFIX} {row['colour']}\n"
    assert out["label"] == row["colour"]
    json.dumps(out)  # plain JSON: the dataset fingerprint is stable


def test_a_local_file_and_a_large_picture_are_read_and_scaled(tmp_path: Path) -> None:
    Image.new("RGB", (1000, 500), (10, 20, 30)).save(tmp_path / "big.jpg")
    out = image_label_row(
        {"image": str(tmp_path / "big.jpg"), "label": "Dark_Sky"}, "row", max_image_size=100
    )
    uri = out["messages"][0]["content"][0]["image"]
    assert uri.startswith("data:image/png;base64,")
    assert _picture({"image": uri}).size == (100, 50)
    assert out["label"] == "dark sky"  # tinker-cookbook's cleaned class name


@pytest.mark.parametrize(
    ("row", "expected"),
    [
        ({"label": "red"}, 'field "image" is missing'),
        ({"image": "data:image/png;base64,AAAA", "label": "red"}, "is not an image Pillow reads"),
        ({"image": "/no/such/file.png", "label": "red"}, "which is not a file"),
        ({"image": "https://example.com/x.png", "label": "red"}, "remote URLs are not fetched"),
        (
            {"image": "data:image/png;base64,AAAA", "label": 3},
            'field "label" is 3; expected a class name',
        ),
    ],
)
def test_a_bad_row_is_one_line_naming_it(row: dict[str, object], expected: str) -> None:
    with pytest.raises(DataError) as err:
        image_label_row(row, "dataset file x.jsonl:7")
    assert str(err.value).startswith("dataset file x.jsonl:7: ") and expected in str(err.value)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("size", [(64, 64), (20, 300), (1000, 700), (33, 47), (8, 8)])
def test_the_fake_counts_image_tokens_as_the_tiny_vlm_processor_does(size: tuple[int, int]) -> None:
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    from kitchen.adapters.local.model.tiny import TINY_IMAGE_PROCESSOR

    fake = FakeImageProcessor()
    real = Qwen2VLImageProcessorPil(**TINY_IMAGE_PROCESSOR)
    width, height = size
    assert fake.get_number_of_image_patches(height, width) == real.get_number_of_image_patches(
        height, width
    )
    out = real(images=[Image.new("RGB", size)], return_tensors="np")
    t, h, w = out["image_grid_thw"][0]
    assert fake.get_number_of_image_patches(height, width) == t * h * w
