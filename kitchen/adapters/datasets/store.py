"""`HFDatasetStore`: the DatasetStore port over bundled files, local files and the Hugging Face hub.

How a source is read, in order:

- `bundled:NAME` -> a JSONL file shipped in `cookbook/data` (see `bundled.py`);
- a path that exists, or ends in .jsonl/.json/.parquet/.arrow, or starts with / ./ ../ ~ -> read
  from disk (a folder: `SPLIT.jsonl|json|parquet|arrow` inside it, or a `save_to_disk` folder);
- anything else -> a hub name "org/name" or "org/name:config" through `datasets.load_dataset`.

`split` is a split name with an optional integer slice, "train", "test", "train[:200]". A local
file is the "train" split of its dataset; another split S of `data/x.jsonl` is the sibling file
`data/x_S.jsonl`, so `load("data/x.jsonl", "test")` never silently returns training rows.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kitchen.adapters.datasets.bundled import (
    bundled_names,
    bundled_splits,
    default_bundled_dir,
    resolve_bundled,
)
from kitchen.adapters.datasets.hub import load_hub
from kitchen.adapters.datasets.local_files import (
    SUFFIXES,
    is_saved_dataset,
    read_file,
    read_saved_dataset,
    saved_dataset_splits,
)
from kitchen.adapters.datasets.rows import Rows, parse_split
from kitchen.engine.errors import DataError

BUNDLED_PREFIX = "bundled:"


class HFDatasetStore:
    """Rows by name: `bundled:NAME`, a local file or folder, or a Hugging Face hub name.

    Args:
        bundled_dir: folder of the bundled JSONL files and their `index.json`; default: the
            `cookbook.data` package, looked up by name at first use (the engine never imports
            cookbook).
        cache_dir: `datasets` cache for hub datasets; default: `datasets`' own
            (`HF_DATASETS_CACHE`, under `HF_HOME`).
    """

    name = "hf"

    def __init__(self, bundled_dir: str | Path | None = None, cache_dir: str | None = None):
        self._bundled_dir = Path(bundled_dir) if bundled_dir is not None else None
        self.cache_dir = cache_dir

    @property
    def bundled_dir(self) -> Path:
        if self._bundled_dir is None:
            self._bundled_dir = default_bundled_dir()
        return self._bundled_dir

    def load(self, source: str, split: str = "train") -> Rows:
        """Every row of `source`'s split `split`, as plain dicts that remember file:line."""
        spec = parse_split(split)
        if source.startswith(BUNDLED_PREFIX):
            path = resolve_bundled(self.bundled_dir, source[len(BUNDLED_PREFIX) :], spec.name)
            rows = read_file(path, spec.name)
        elif is_local(source):
            rows = _read_local(Path(source).expanduser(), spec.name)
        else:
            # `datasets` understands the slice itself and then reads only those rows.
            return load_hub(source, split, spec, self.cache_dir)
        return rows.sliced(spec.start, spec.stop) if spec.is_sliced else rows

    def stream(
        self, source: str, split: str = "train", shuffle_buffer: int = 0, seed: int = 0
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        """`source`'s rows one at a time as they are pulled, each with its locator (stream.py):
        a hub name streams (`datasets`' streaming=True), a JSONL file is read line by line.
        `shuffle_buffer` N > 1: through a shuffle buffer of N rows seeded by `seed`, so the same
        seed pulls the same order (a resumed run re-reads it to its step's rows)."""
        from kitchen.adapters.datasets.stream import shuffled, stream_rows

        return shuffled(stream_rows(self, source, split), shuffle_buffer, seed)

    def splits(self, source: str) -> list[str] | None:
        """Split names `load` accepts for a bundled or local source; None for hub names (unknown
        without asking the hub)."""
        if source.startswith(BUNDLED_PREFIX):
            return list(bundled_splits(self.bundled_dir, source[len(BUNDLED_PREFIX) :]))
        if not is_local(source):
            return None
        path = Path(source).expanduser()
        if path.is_dir() and is_saved_dataset(path):
            return sorted(saved_dataset_splits(path))
        if path.is_dir():
            return sorted({p.stem for p in path.iterdir() if p.suffix.lower() in SUFFIXES})
        found = ["train"] if path.is_file() else []
        if path.parent.is_dir():
            siblings = path.parent.glob(f"{path.stem}_*{path.suffix}")
            found += sorted(p.stem[len(path.stem) + 1 :] for p in siblings)
        return found

    def bundled_names(self) -> list[str]:
        """Names `bundled:NAME` accepts."""
        return bundled_names(self.bundled_dir)


def is_local(source: str) -> bool:
    """A source names a path if it exists or looks like one; hub names never have a suffix."""
    if source.startswith(("/", "./", "../", "~")) or source.lower().endswith(SUFFIXES):
        return True
    return Path(source).exists()


def _read_local(path: Path, split: str) -> Rows:
    if path.is_dir():
        for suffix in SUFFIXES:
            if (path / f"{split}{suffix}").is_file():
                return read_file(path / f"{split}{suffix}", split)
        if is_saved_dataset(path):
            return read_saved_dataset(path, split)
        raise DataError(
            f'dataset folder {path}: has no split "{split}" (looked for {split}.jsonl, '
            f"{split}.json, {split}.parquet, {split}.arrow and a save_to_disk layout)"
        )
    if split == "train":
        return read_file(path, split)
    sibling = path.with_name(f"{path.stem}_{split}{path.suffix}")
    if sibling.is_file():
        return read_file(sibling, "train")  # the sibling file is the whole split
    if path.suffix.lower() == ".json" and path.is_file():
        return read_file(path, split)  # a JSON object may hold several splits by name
    raise DataError(
        f'dataset file {path} is the "train" split; split "{split}" would be {sibling}, '
        "which does not exist"
    )
