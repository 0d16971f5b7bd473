"""Rows read one at a time as a consumer reaches them, instead of a whole split first: what a
training loop over a dataset too large to load (OpenThoughts3's 1.2M reasoning traces) reads.

`stream_rows(store, source, split)` yields `(where, row)` pairs, `where` the phrase an error about
the row starts with, as `Rows.where` gives for a loaded split:
- a JSONL file (bundled or local): one line parsed per row pulled;
- a parquet file: one record batch of the file at a time;
- a hub name: `datasets.load_dataset(..., streaming=True)`, an IterableDataset that downloads as
  it is read (a slice "train[a:b]" skips a rows and stops at b);
- anything else local (a .json array, .arrow, a save_to_disk folder): loaded, then yielded.

`shuffled(rows, buffer_size, seed)` is a stream's shuffle, as tinker-cookbook shuffles its
streamed SFT data (`datasets`' IterableDataset.shuffle(seed, buffer_size), whose order is its
own): a buffer of N rows, each row pulled replacing a uniformly chosen one, which is yielded; the
buffer left at the end is yielded in a random order. Memory is N rows; a row comes out at most N
places earlier than it went in, and may come out any number of places later.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from kitchen.adapters.datasets.hub import offline_mode, parse_hub_name
from kitchen.adapters.datasets.local_files import json_lines
from kitchen.adapters.datasets.rows import SplitSpec, parse_split
from kitchen.engine.errors import DataError

StreamedRow = tuple[str, dict[str, Any]]
T = TypeVar("T")


def shuffled(rows: Iterator[T], buffer_size: int, seed: int) -> Iterator[T]:
    """`rows` through a seeded shuffle buffer of `buffer_size` (module doc); 1 or less: as is."""
    if buffer_size <= 1:
        yield from rows
        return
    rng = np.random.default_rng(seed)
    buffer: list[T] = []
    for row in rows:
        if len(buffer) < buffer_size:
            buffer.append(row)
            continue
        i = int(rng.integers(buffer_size))
        yield buffer[i]
        buffer[i] = row
    for i in rng.permutation(len(buffer)):
        yield buffer[int(i)]


def stream_jsonl(path: Path) -> Iterator[StreamedRow]:
    """One JSON object per line, parsed as it is pulled; blank lines skipped."""
    origin = f"dataset file {path}"
    with path.open(encoding="utf-8") as f:
        for lineno, row in json_lines(f, origin):
            if not isinstance(row, dict):
                raise DataError(f"{origin}:{lineno}: line is not a JSON object (one row per line)")
            yield f"{origin}:{lineno}", row


def stream_parquet(path: Path) -> Iterator[StreamedRow]:
    import pyarrow.parquet as pq

    origin, i = f"dataset file {path}", 0
    for batch in pq.ParquetFile(path).iter_batches(batch_size=1024):
        for row in batch.to_pylist():
            yield f"{origin} row {i}", row
            i += 1


def stream_hub(source: str, spec: SplitSpec, cache_dir: str | None) -> Iterator[StreamedRow]:
    import datasets

    name, config = parse_hub_name(source)
    try:
        stream = datasets.load_dataset(
            name, config, split=spec.name, streaming=True, cache_dir=cache_dir
        )
    except (ConnectionError, FileNotFoundError) as e:
        why = " (HF_HUB_OFFLINE is set)" if offline_mode() else ""
        raise DataError(
            f"dataset {source} ({spec.name}): cannot stream from the hub{why}: {e}"
        ) from None
    start = spec.start or 0
    if start < 0 or (spec.stop is not None and spec.stop < 0):
        raise DataError(f"dataset {source}: a streamed split takes no negative slice ({spec})")
    origin = f"dataset {source} ({spec.name})"
    for i, row in itertools.islice(enumerate(stream), start, spec.stop):
        yield f"{origin} row {i}", dict(row)


def stream_rows(store: Any, source: str, split: str = "train") -> Iterator[StreamedRow]:
    """`source`'s split `split` of the HFDatasetStore `store`, a row at a time."""
    from kitchen.adapters.datasets.bundled import resolve_bundled
    from kitchen.adapters.datasets.store import BUNDLED_PREFIX, is_local

    spec = parse_split(split)
    path: Path | None = None
    if source.startswith(BUNDLED_PREFIX):
        path = resolve_bundled(store.bundled_dir, source[len(BUNDLED_PREFIX) :], spec.name)
    elif is_local(source):
        candidate = Path(source).expanduser()
        if candidate.is_file() and spec.name == "train":
            path = candidate
    else:
        yield from stream_hub(source, spec, store.cache_dir)
        return
    if path is not None and path.suffix.lower() == ".jsonl":
        rows: Iterator[StreamedRow] = stream_jsonl(path)
    elif path is not None and path.suffix.lower() == ".parquet":
        rows = stream_parquet(path)
    else:
        loaded = store.load(source, spec.name)
        rows = ((loaded.where(i), row) for i, row in enumerate(loaded))
    yield from itertools.islice(rows, spec.start, spec.stop)
