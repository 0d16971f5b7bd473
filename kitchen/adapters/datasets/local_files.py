"""Readers for dataset files on disk: JSONL, JSON, parquet, arrow, and `save_to_disk` folders.

JSONL is parsed here line by line (not through `datasets`) so a bad line is reported as
"file:line: what is wrong"; the columnar formats go through pyarrow, imported lazily.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from kitchen.adapters.datasets.rows import Rows
from kitchen.engine.errors import DataError

SUFFIXES = (".jsonl", ".json", ".parquet", ".arrow")


def json_lines(lines: Iterable[str], origin: str) -> Iterator[tuple[int, Any]]:
    """Each non-blank line's JSON value with its 1-based line number, parsed as it is pulled."""
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            yield lineno, json.loads(line)
        except json.JSONDecodeError as e:
            raise DataError(
                f"{origin}:{lineno}: invalid JSON: {e.msg} at column {e.colno}"
            ) from None


def read_jsonl(path: Path) -> Rows:
    """One JSON object per line; blank lines are skipped; line numbers are 1-based."""
    origin = f"dataset file {path}"
    rows: list[dict[str, Any]] = []
    lines: list[int] = []
    with _open_text(path) as f:
        for lineno, row in json_lines(_decoded_lines(f, origin), origin):
            if not isinstance(row, dict):
                raise DataError(
                    f"{origin}:{lineno}: line is a JSON {_json_type(row)}; expected an object "
                    "(one row per line)"
                )
            rows.append(row)
            lines.append(lineno)
    return _non_empty(Rows(rows, origin, lines=lines), origin)


def read_json(path: Path, split: str) -> Rows:
    """A JSON array of objects, or an object holding one (`{"train": [...]}` or `{"data": [...]}`).

    `Dataset.to_json` writes JSON Lines even under a `.json` name, so a file that is not one JSON
    document but whose first line is an object is read as JSONL.
    """
    origin = f"dataset file {path}"
    with _open_text(path) as f:
        text = "".join(_decoded_lines(f, origin))
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        if e.msg == "Extra data" and split == "train":
            return read_jsonl(path)
        if e.msg == "Extra data":
            raise DataError(
                f'{origin}: JSON Lines are the "train" split; no split "{split}"'
            ) from None
        raise DataError(f"{origin}:{e.lineno}: invalid JSON: {e.msg} at column {e.colno}") from None
    if isinstance(doc, dict):
        key = "data" if split == "train" and not isinstance(doc.get(split), list) else split
        if not isinstance(doc.get(key), list):
            raise DataError(
                f'{origin}: top-level object has no array under "{key}"; expected an array of '
                'row objects, or an object of arrays by split name ({"train": [...]})'
            )
        doc, origin = doc[key], f'{origin} "{key}"'
    elif not isinstance(doc, list):
        raise DataError(f"{origin}: top level is a JSON {_json_type(doc)}; expected an array")
    elif split != "train":
        raise DataError(f'{origin}: one JSON array is the "train" split; it has no split "{split}"')
    for i, row in enumerate(doc):
        if not isinstance(row, dict):
            raise DataError(f"{origin} row {i}: is a JSON {_json_type(row)}; expected an object")
    return _non_empty(Rows(doc, origin), origin)


def read_parquet(path: Path) -> Rows:
    import pyarrow.parquet as pq

    origin = f"dataset file {path}"
    try:
        table = pq.read_table(path)
    except Exception as e:  # pyarrow raises several unrelated types for a bad file
        raise DataError(f"{origin}: not a readable parquet file ({_first_line(e)})") from None
    return _non_empty(Rows(table.to_pylist(), origin), origin)


def read_arrow(path: Path) -> Rows:
    """Arrow IPC: the stream format `datasets` writes, or the random-access file format."""
    import pyarrow as pa

    origin = f"dataset file {path}"
    readers: list[Callable[[Any], Any]] = [pa.ipc.open_stream, pa.ipc.open_file]
    for open_reader in readers:
        try:
            with pa.memory_map(str(path)) as source:
                table = open_reader(source).read_all()
            return _non_empty(Rows(table.to_pylist(), origin), origin)
        except pa.ArrowInvalid:
            continue
    raise DataError(f"{origin}: not an Arrow IPC stream or file")


def read_saved_dataset(directory: Path, split: str) -> Rows:
    """A folder written by `Dataset.save_to_disk` / `DatasetDict.save_to_disk`."""
    import datasets

    origin = f"dataset folder {directory}"
    loaded = datasets.load_from_disk(str(directory))
    if isinstance(loaded, datasets.DatasetDict):
        if split not in loaded:
            raise DataError(
                f'{origin}: has no split "{split}"; available: {", ".join(sorted(loaded))}'
            )
        loaded, origin = loaded[split], f"{origin} ({split})"
    return _non_empty(Rows(loaded.to_list(), origin), origin)


def is_saved_dataset(directory: Path) -> bool:
    return (directory / "dataset_dict.json").is_file() or (directory / "state.json").is_file()


def saved_dataset_splits(directory: Path) -> list[str]:
    """Split names of a `DatasetDict.save_to_disk` folder (["train"] for a single Dataset)."""
    if (directory / "state.json").is_file():
        return ["train"]
    try:
        splits = json.loads((directory / "dataset_dict.json").read_text(encoding="utf-8"))["splits"]
    except (OSError, ValueError, KeyError, TypeError):
        return []
    return [str(s) for s in splits]


READERS: dict[str, Callable[[Path], Rows]] = {
    ".jsonl": read_jsonl,
    ".parquet": read_parquet,
    ".arrow": read_arrow,
}


def read_file(path: Path, split: str) -> Rows:
    """Read one file by its suffix."""
    if not path.is_file():
        raise DataError(f"dataset file {path} does not exist")
    suffix = path.suffix.lower()
    if suffix == ".json":
        return read_json(path, split)
    if suffix not in READERS:
        raise DataError(
            f"dataset file {path}: unsupported suffix {suffix or '(none)'}; expected one of "
            + ", ".join(SUFFIXES)
        )
    return READERS[suffix](path)


def _open_text(path: Path) -> Any:
    try:
        return path.open("rb")
    except OSError as e:
        raise DataError(f"dataset file {path}: cannot be opened ({e.strerror})") from None


def _decoded_lines(f: Any, origin: str) -> Any:
    for lineno, raw in enumerate(f, start=1):
        try:
            yield raw.decode("utf-8-sig" if lineno == 1 else "utf-8")
        except UnicodeDecodeError as e:
            raise DataError(f"{origin}:{lineno}: not valid UTF-8 at byte {e.start}") from None


def _non_empty(rows: Rows, origin: str) -> Rows:
    if not rows:
        raise DataError(f"{origin}: has no rows")
    return rows


def _json_type(value: Any) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}.get(
        type(value), "number"
    )


def _first_line(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0]
