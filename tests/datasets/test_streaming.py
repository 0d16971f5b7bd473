"""Streaming rows from the dataset store: rows are read as they are pulled (a bad line later in a
file fails only when reached), with the same locators as a loaded split, slices, parquet, the
bundled files, and hub names through datasets' streaming=True."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from kitchen.adapters.datasets import HFDatasetStore
from kitchen.engine.errors import DataError


def write_jsonl(path: Path, rows: list[Any], bad_line: int | None = None) -> Path:
    lines = [json.dumps(r) for r in rows]
    if bad_line is not None:
        lines.insert(bad_line - 1, "{not json")
    path.write_text("\n".join(lines) + "\n")
    return path


def test_rows_are_read_as_they_are_pulled(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "d.jsonl", [{"i": i} for i in range(5)], bad_line=4)
    stream = HFDatasetStore().stream(str(path))
    first = list(itertools.islice(stream, 3))  # the bad line 4 is not reached
    assert first == [(f"dataset file {path}:{n}", {"i": n - 1}) for n in (1, 2, 3)]
    with pytest.raises(DataError, match=r"d\.jsonl:4: invalid JSON"):
        next(stream)


def test_stream_matches_load_on_local_and_bundled_files(tmp_path: Path) -> None:
    store = HFDatasetStore()
    path = write_jsonl(tmp_path / "d.jsonl", [{"i": i} for i in range(6)])
    for source in (str(path), "bundled:math500"):
        split = "test" if source.startswith("bundled") else "train"
        loaded = store.load(source, split)
        streamed = list(store.stream(source, split))
        assert [r for _, r in streamed] == list(loaded)
        assert [w for w, _ in streamed] == [loaded.where(i) for i in range(len(loaded))]
    assert [r["i"] for _, r in store.stream(str(path), "train[2:4]")] == [2, 3]


def test_parquet_streams_by_record_batch(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    path = tmp_path / "d.parquet"
    pq.write_table(pa.table({"i": list(range(3000))}), path)
    streamed = HFDatasetStore().stream(str(path))
    assert next(streamed) == (f"dataset file {path} row 0", {"i": 0})
    assert sum(1 for _ in streamed) == 2999


def test_hub_names_stream_through_datasets(monkeypatch: pytest.MonkeyPatch) -> None:
    datasets = pytest.importorskip("datasets")
    calls: list[dict[str, Any]] = []

    def fake_load_dataset(name: str, config: Any = None, **kwargs: Any) -> Any:
        calls.append({"name": name, "config": config, **kwargs})
        return ({"n": n} for n in itertools.count())  # endless, as a stream may be

    monkeypatch.setattr(datasets, "load_dataset", fake_load_dataset)
    stream = HFDatasetStore().stream("open-thoughts/OpenThoughts3-1.2M", "train[5:8]")
    assert [r["n"] for _, r in stream] == [5, 6, 7]
    assert calls[0]["streaming"] is True and calls[0]["split"] == "train"
    where, _ = next(HFDatasetStore().stream("org/name:cfg", "train"))
    assert where == "dataset org/name:cfg (train) row 0" and calls[1]["config"] == "cfg"


def test_a_shuffle_buffer_permutes_the_stream_by_its_seed(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "d.jsonl", [{"i": i} for i in range(50)])
    store = HFDatasetStore()

    def order(buffer: int, seed: int = 0) -> list[int]:
        return [r["i"] for _, r in store.stream(str(path), shuffle_buffer=buffer, seed=seed)]

    assert order(0) == order(1) == list(range(50))  # no buffer: stream order
    shuffled = order(8)
    assert sorted(shuffled) == list(range(50)) and shuffled != list(range(50))
    assert order(8) == shuffled and order(8, seed=1) != shuffled  # the seed decides
    # a row comes out at most N places earlier than it went in; rows of the tail move later
    assert all(out >= row - 8 for out, row in enumerate(shuffled))
    assert order(100) != list(range(50)) and sorted(order(100)) == list(range(50))
    # the locators ride with their rows
    located = dict(store.stream(str(path), shuffle_buffer=8))
    assert all(where.endswith(f":{row['i'] + 1}") for where, row in located.items())


def test_the_buffer_holds_n_rows_and_reads_no_further_ahead(tmp_path: Path) -> None:
    """The first row out is pulled after N + 1 rows are read: a bad line beyond is not reached."""
    path = write_jsonl(tmp_path / "d.jsonl", [{"i": i} for i in range(20)], bad_line=7)
    stream = HFDatasetStore().stream(str(path), shuffle_buffer=5)
    assert next(stream)[1]["i"] in range(6)  # lines 1-6 read, the bad line 7 not yet
    with pytest.raises(DataError, match=r"d\.jsonl:7: invalid JSON"):
        list(stream)
