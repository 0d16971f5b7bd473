"""Bundled datasets: small JSONL files shipped in the `cookbook.data` package.

The engine never imports cookbook (import direction cookbook -> kitchen), so the folder is found
by package *name* at run time through `importlib.resources`, or given explicitly as the store's
`bundled_dir`. The folder's `index.json` maps each name to its split files:

    {"chat": {"shape": "chat", "splits": {"train": "chat.jsonl", "test": "chat_test.jsonl"}, ...}}

A name missing from the index still resolves by file name: `bundled:chat_test` is
`chat_test.jsonl`, and split S of `bundled:NAME` is `NAME_S.jsonl`.
"""

from __future__ import annotations

import importlib.resources
import json
from pathlib import Path
from typing import Any

from kitchen.engine.errors import DataError

BUNDLED_PACKAGE = "cookbook.data"
INDEX_FILE = "index.json"


def default_bundled_dir() -> Path:
    """The on-disk folder of the `cookbook.data` package, looked up by name."""
    try:
        folder = importlib.resources.files(BUNDLED_PACKAGE)
    except ModuleNotFoundError:
        raise DataError(
            f"bundled datasets need the package {BUNDLED_PACKAGE}, which is not installed; "
            "pass bundled_dir= to the dataset store"
        ) from None
    return Path(str(folder))


def read_index(bundled_dir: Path) -> dict[str, dict[str, Any]]:
    path = bundled_dir / INDEX_FILE
    if not path.is_file():
        return {}
    try:
        index = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise DataError(f"bundled index {path}:{e.lineno}: invalid JSON: {e.msg}") from None
    if not isinstance(index, dict):
        raise DataError(f"bundled index {path}: expected an object of dataset entries")
    return index


def bundled_splits(bundled_dir: Path, name: str) -> dict[str, Path]:
    """Split name -> file for bundled dataset `name` (empty when there is no such dataset)."""
    entry = read_index(bundled_dir).get(name)
    if isinstance(entry, dict) and isinstance(entry.get("splits"), dict):
        return {split: bundled_dir / file for split, file in entry["splits"].items()}
    splits = {}
    if (bundled_dir / f"{name}.jsonl").is_file():
        splits["train"] = bundled_dir / f"{name}.jsonl"
    for path in sorted(bundled_dir.glob(f"{name}_*.jsonl")):
        split = path.stem[len(name) + 1 :]
        if split and "_" not in split:
            splits[split] = path
    return splits


def bundled_names(bundled_dir: Path) -> list[str]:
    """Indexed datasets, then JSONL files no indexed dataset claims (`bundled:FILE_STEM`)."""
    index = read_index(bundled_dir)
    claimed = {f for entry in index.values() for f in entry.get("splits", {}).values()}
    return list(index) + sorted(
        p.stem for p in bundled_dir.glob("*.jsonl") if p.name not in claimed and p.stem not in index
    )


def resolve_bundled(bundled_dir: Path, name: str, split: str) -> Path:
    """The file holding split `split` of bundled dataset `name`."""
    splits = bundled_splits(bundled_dir, name)
    if not splits:
        known = ", ".join(n for n in read_index(bundled_dir)) or "(none)"
        raise DataError(f"bundled dataset {name!r} does not exist; bundled datasets: {known}")
    if split not in splits:
        raise DataError(
            f'bundled dataset {name} has no split "{split}"; available: {", ".join(splits)}'
        )
    return splits[split]
