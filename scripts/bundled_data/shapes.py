"""The bundled `shapes` set: small PNG pictures of one coloured shape on a light background, for
the vision recipes. Each row is {"image": a PNG data URI, "colour", "shape", "label"}: the image
inline (as a hub dataset's image column carries its bytes), so a row is whole wherever it is read.

Classes are every colour and shape pair; each split has the same number of rows per class, and the
held-out rows are drawn from the same generator after the training rows (fresh positions, sizes and
shades, never a training picture). The label the classifier learns is the colour: it is what a
tiny random-weight VLM can learn in minutes on a CPU; `shape` is there for harder runs.
"""

from __future__ import annotations

import base64
import io
import random

COLOURS = {
    "red": (220, 40, 40),
    "green": (40, 170, 60),
    "blue": (40, 80, 220),
    "yellow": (235, 200, 30),
}
SHAPES = ("circle", "square", "triangle")
SIZE = 64  # pixels a side: a few image tokens under Qwen-VL patching (14 or 16 px, 2x2 merge)


def _jitter(rgb: tuple[int, int, int], r: random.Random, amount: int) -> tuple[int, int, int]:
    red, green, blue = (min(255, max(0, c + r.randint(-amount, amount))) for c in rgb)
    return red, green, blue


def draw(colour: str, shape: str, r: random.Random) -> bytes:
    """One picture as PNG bytes: the shape at a random place and size, a shade of its colour."""
    from PIL import Image, ImageDraw

    background = _jitter((235, 235, 235), r, 15)
    image = Image.new("RGB", (SIZE, SIZE), background)
    pen = ImageDraw.Draw(image)
    side = r.randint(SIZE * 5 // 10, SIZE * 8 // 10)
    x0, y0 = r.randint(2, SIZE - side - 2), r.randint(2, SIZE - side - 2)
    box = (x0, y0, x0 + side, y0 + side)
    fill = _jitter(COLOURS[colour], r, 20)
    if shape == "circle":
        pen.ellipse(box, fill=fill)
    elif shape == "square":
        pen.rectangle(box, fill=fill)
    else:
        pen.polygon([(x0 + side // 2, y0), (x0, y0 + side), (x0 + side, y0 + side)], fill=fill)
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", optimize=False, compress_level=9)
    return buffer.getvalue()


def _rows(r: random.Random, per_class: int) -> list[dict[str, str]]:
    rows = [
        {"colour": colour, "shape": shape}
        for colour in COLOURS
        for shape in SHAPES
        for _ in range(per_class)
    ]
    r.shuffle(rows)
    return [
        {
            "image": "data:image/png;base64,"
            + base64.b64encode(draw(row["colour"], row["shape"], r)).decode("ascii"),
            "label": row["colour"],
            **row,
        }
        for row in rows
    ]


def make_shapes(
    seed: int, train_per_class: int, test_per_class: int
) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    """Train and held-out rows, `*_per_class` of each colour and shape pair."""
    r = random.Random(seed)
    return _rows(r, train_per_class), _rows(r, test_per_class)
