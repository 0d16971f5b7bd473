"""Images on the local engine: what an image costs in tokens, processing and step time (issue 37).

    .venv/bin/python bench/vision.py                         # the tiny VLM, about a minute on 2 cores
    .venv/bin/python bench/vision.py --model /path/to/Qwen3-VL-2B-Instruct --steps 3

Prints: the model's parameters (vision tower and the rest); the image tokens of several image sizes
(the processor's count, which is what counts against the context); the time to decode and process
one image, first and cached; and the median forward_backward + optim_step time of a batch of image
SFT datums against the same batch with each image chunk replaced by as many text tokens (so both
push the same number of tokens through the decoder; the difference is the vision tower and the
plain, unshared pass). Wall times depend on the machine's other load: note it and compare only
runs taken on quiet cores.
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

SIZES = [(32, 32), (64, 48), (128, 96), (224, 224), (640, 480)]


def _png(size: tuple[int, int], seed: int) -> bytes:
    from PIL import Image

    pixels = np.random.default_rng(seed).integers(0, 255, (size[1], size[0], 3), dtype=np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="PNG")
    return buffer.getvalue()


def _batch(vision: Any, n: int, text: bool) -> list[Any]:
    from tinker import types

    from tests.helpers import image_datum  # the export test's image datum

    data = []
    for i in range(n):
        image = vision.image(_png((128, 96), i), "png", "bench")
        middle: Any = (
            # a plain token: the engine refuses the image placeholder outside an image chunk
            types.EncodedTextChunk(tokens=[40] * image.tokens)
            if text
            else types.ImageChunk(
                data=_png((128, 96), i), format="png", expected_tokens=image.tokens
            )
        )
        head, tail = [1, 40, 50, 10], [60, 61, 62, 2, 10, 1, 70, 10, 80, 81, 82, 2]
        n_tokens = len(head) + image.tokens + len(tail)
        targets = np.full(n_tokens - 1, 80, dtype=np.int64)
        weights = np.ones(n_tokens - 1, dtype=np.float32)
        data.append(image_datum(head, middle, tail, targets, weights))
    return data


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="kitchen/tiny-qwen3-vl")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--steps", type=int, default=6)
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from tinker import types

    from kitchen.adapters.local import create_local_backend
    from kitchen.adapters.local.model.images import vision_of
    from kitchen.ports import BackendSettings

    print(f"load: {os.getloadavg()[0]:.1f} (1-minute average; other work inflates every time)")
    with tempfile.TemporaryDirectory() as log_dir:
        backend = create_local_backend(
            BackendSettings(log_dir=Path(log_dir), seed=0, dtype="float32")
        )
        client = backend.create_lora_training_client(args.model, rank=8)
        base = client.host.base
        vision = vision_of(base)
        if vision is None:
            raise SystemExit(f"{args.model} is a text-only model")
        tower = sum(p.numel() for p in base.model.visual.parameters())
        total = sum(p.numel() for p in base.parameters())
        print(f"parameters: {total:,} ({tower:,} in the vision tower)")
        for size in SIZES:
            image = vision.image(_png(size, 99), "png", "bench")
            print(
                f"  image {size[0]}x{size[1]}: grid {list(image.grid_thw)} -> {image.tokens} tokens"
            )
        data = _png((640, 480), 7)
        start = time.perf_counter()
        vision.image(data, "png", "bench")
        first = time.perf_counter() - start
        start = time.perf_counter()
        vision.image(data, "png", "bench")
        print(
            f"process one 640x480 png: {first * 1e3:.1f} ms, cached {(time.perf_counter() - start) * 1e3:.2f} ms"
        )
        adam = types.AdamParams(learning_rate=1e-4)
        for label, text in (("images", False), ("text stand-in", True)):
            batch = _batch(vision, args.batch, text)
            times = []
            for _ in range(args.steps):
                start = time.perf_counter()
                client.forward_backward(batch, "cross_entropy").result()
                client.optim_step(adam).result()
                times.append(time.perf_counter() - start)
            tokens = sum(d.model_input.length for d in batch)
            median = statistics.median(times[1:])
            print(
                f"step, {args.batch} rows ({tokens} tokens), {label}: median {median * 1e3:.1f} ms"
            )
        backend.close()


if __name__ == "__main__":
    main()
