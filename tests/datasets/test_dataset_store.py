"""HFDatasetStore: bundled names, local files of every format, hub names (offline), bad input."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from kitchen.adapters.datasets import HFDatasetStore, parse_split
from kitchen.adapters.datasets import hub as hub_module
from kitchen.engine.errors import DataError
from kitchen.ports import DatasetStore
from tests.helpers import modules_loaded_by


def write_jsonl(path: Path, rows: list[object], blank_after: int | None = None) -> Path:
    lines = [json.dumps(r) for r in rows]
    if blank_after is not None:
        lines.insert(blank_after, "")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def store() -> HFDatasetStore:
    return HFDatasetStore()


def test_store_satisfies_the_port(store: HFDatasetStore) -> None:
    assert isinstance(store, DatasetStore)
    assert store.name == "hf"


def test_importing_the_store_loads_neither_datasets_nor_pyarrow() -> None:
    loaded = modules_loaded_by("import kitchen.adapters.datasets", ("datasets", "pyarrow", "torch"))
    assert loaded == []


def test_bundled_names_resolve_to_the_shipped_files(store: HFDatasetStore) -> None:
    assert {"chat", "prefs", "math", "code", "prompt_distill"} <= set(store.bundled_names())
    train, test = store.load("bundled:chat"), store.load("bundled:chat", "test")
    assert len(train) == 400 and len(test) == 60
    assert all("messages" in row for row in train)
    assert train.where(0).endswith("chat.jsonl:1")
    assert store.splits("bundled:code") == ["train"]


def test_bundled_unknown_name_and_split_are_clear_errors(store: HFDatasetStore) -> None:
    with pytest.raises(DataError, match=r"bundled dataset 'chatt' does not exist; .*chat"):
        store.load("bundled:chatt")
    with pytest.raises(
        DataError, match=r'bundled dataset code has no split "test"; available: train'
    ):
        store.load("bundled:code", "test")


def test_bundled_dir_argument_without_an_index_resolves_by_file_name(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "toy.jsonl", [{"x": 1}, {"x": 2}])
    write_jsonl(tmp_path / "toy_test.jsonl", [{"x": 3}])
    store = HFDatasetStore(bundled_dir=tmp_path)
    assert [r["x"] for r in store.load("bundled:toy")] == [1, 2]
    assert [r["x"] for r in store.load("bundled:toy", "test")] == [3]
    assert store.splits("bundled:toy") == ["train", "test"]


def test_local_jsonl_rows_remember_their_lines(tmp_path: Path, store: HFDatasetStore) -> None:
    path = write_jsonl(tmp_path / "d.jsonl", [{"a": 1}, {"a": 2}, {"a": 3}], blank_after=1)
    rows = store.load(str(path))
    assert list(rows) == [{"a": 1}, {"a": 2}, {"a": 3}]
    assert rows.where(1) == f"dataset file {path}:3"  # the blank line 2 still counts


def test_bad_json_line_names_file_and_line(tmp_path: Path, store: HFDatasetStore) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"a": 1}\n{"a": 2,}\n', encoding="utf-8")
    with pytest.raises(DataError, match=rf"^dataset file {path}:2: invalid JSON: .* at column"):
        store.load(str(path))


def test_a_line_that_is_not_an_object_is_rejected(tmp_path: Path, store: HFDatasetStore) -> None:
    path = write_jsonl(tmp_path / "arr.jsonl", [{"a": 1}, [1, 2]])
    with pytest.raises(DataError, match=r":2: line is a JSON array; expected an object"):
        store.load(str(path))


def test_missing_and_empty_files(tmp_path: Path, store: HFDatasetStore) -> None:
    with pytest.raises(DataError, match="does not exist"):
        store.load(str(tmp_path / "nope.jsonl"))
    (tmp_path / "empty.jsonl").write_text("\n", encoding="utf-8")
    with pytest.raises(DataError, match="has no rows"):
        store.load(str(tmp_path / "empty.jsonl"))


def test_parquet_and_arrow_files_load_directly(tmp_path: Path, store: HFDatasetStore) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pylist([{"q": "one", "n": 1}, {"q": "two", "n": 2}])
    pq.write_table(table, tmp_path / "d.parquet")
    with (
        pa.OSFile(str(tmp_path / "stream.arrow"), "wb") as sink,
        pa.ipc.new_stream(sink, table.schema) as writer,
    ):
        writer.write_table(table)
    with (
        pa.OSFile(str(tmp_path / "file.arrow"), "wb") as sink,
        pa.ipc.new_file(sink, table.schema) as writer,
    ):
        writer.write_table(table)
    for name in ("d.parquet", "stream.arrow", "file.arrow"):
        rows = store.load(str(tmp_path / name))
        assert list(rows) == [{"q": "one", "n": 1}, {"q": "two", "n": 2}], name
        assert rows.where(1).endswith(f"{name} row 1")


def test_json_array_object_of_splits_and_json_lines(tmp_path: Path, store: HFDatasetStore) -> None:
    (tmp_path / "arr.json").write_text(json.dumps([{"a": 1}]), encoding="utf-8")
    (tmp_path / "splits.json").write_text(
        json.dumps({"train": [{"a": 1}], "test": [{"a": 2}]}), encoding="utf-8"
    )
    write_jsonl(tmp_path / "lines.json", [{"a": 1}, {"a": 2}])
    assert list(store.load(str(tmp_path / "arr.json"))) == [{"a": 1}]
    assert list(store.load(str(tmp_path / "splits.json"), "test")) == [{"a": 2}]
    assert len(store.load(str(tmp_path / "lines.json"))) == 2
    with pytest.raises(DataError, match='no split "test"'):
        store.load(str(tmp_path / "arr.json"), "test")


def test_other_splits_of_a_local_file_are_sibling_files(
    tmp_path: Path, store: HFDatasetStore
) -> None:
    write_jsonl(tmp_path / "d.jsonl", [{"a": 1}])
    with pytest.raises(
        DataError, match=r'split "test" would be .*d_test.jsonl, which does not exist'
    ):
        store.load(str(tmp_path / "d.jsonl"), "test")
    write_jsonl(tmp_path / "d_test.jsonl", [{"a": 9}])
    assert list(store.load(str(tmp_path / "d.jsonl"), "test")) == [{"a": 9}]
    (tmp_path / "j.json").write_text("[]", encoding="utf-8")
    (tmp_path / "j_test.json").write_text(json.dumps([{"a": 8}]), encoding="utf-8")
    assert list(store.load(str(tmp_path / "j.json"), "test")) == [{"a": 8}]
    assert store.splits(str(tmp_path / "d.jsonl")) == ["train", "test"]


def test_folders_of_split_files_and_save_to_disk(tmp_path: Path, store: HFDatasetStore) -> None:
    import datasets

    write_jsonl(tmp_path / "train.jsonl", [{"a": 1}])
    assert list(store.load(str(tmp_path))) == [{"a": 1}]
    saved = tmp_path / "saved"
    datasets.DatasetDict(
        {
            "train": datasets.Dataset.from_list([{"b": 1}]),
            "test": datasets.Dataset.from_list([{"b": 2}]),
        }
    ).save_to_disk(str(saved))
    assert list(store.load(str(saved), "test")) == [{"b": 2}]
    assert store.splits(str(saved)) == ["test", "train"]
    with pytest.raises(DataError, match='has no split "validation"'):
        store.load(str(saved), "validation")


def test_split_slices_keep_the_original_line_numbers(tmp_path: Path, store: HFDatasetStore) -> None:
    path = write_jsonl(tmp_path / "d.jsonl", [{"i": i} for i in range(10)])
    rows = store.load(str(path), "train[3:5]")
    assert [r["i"] for r in rows] == [3, 4]
    assert rows.where(0).endswith("d.jsonl:4")
    assert [r["i"] for r in store.load(str(path), "train[-2:]")] == [8, 9]
    with pytest.raises(DataError, match='split "train\\[50%\\]" is not understood'):
        store.load(str(path), "train[50%]")
    assert parse_split("test[:100]").stop == 100


def test_hub_miss_offline_is_a_fast_clear_error(
    store: HFDatasetStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    started = time.monotonic()
    with pytest.raises(DataError) as caught:
        store.load("HuggingFaceH4/no_robots")
    assert time.monotonic() - started < 5
    message = str(caught.value)
    assert "HuggingFaceH4/no_robots" in message
    assert "not in the local Hugging Face cache" in message and "HF_HUB_OFFLINE" in message


def test_hub_miss_when_the_hub_is_unreachable_is_fast(
    store: HFDatasetStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    for var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(hub_module, "hub_reachable", lambda timeout_s=2.0: False)
    started = time.monotonic()
    with pytest.raises(
        DataError,
        match=r"nvidia/HelpSteer3:preference \(train\) is not in the local .* cannot be reached",
    ):
        store.load("nvidia/HelpSteer3:preference")
    assert time.monotonic() - started < 5


def test_hub_names_go_to_load_dataset_with_config_split_and_cache(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import datasets

    calls = []

    def fake_load_dataset(name, config=None, split=None, cache_dir=None):  # type: ignore[no-untyped-def]
        calls.append((name, config, split, cache_dir))
        return datasets.Dataset.from_list([{"question": "q", "answer": "#### 1"}])

    monkeypatch.setattr(datasets, "load_dataset", fake_load_dataset)
    store = HFDatasetStore(cache_dir=str(tmp_path))
    rows = store.load("openai/gsm8k:main", "test[10:]")
    assert calls == [("openai/gsm8k", "main", "test[10:]", str(tmp_path))]
    assert list(rows) == [{"question": "q", "answer": "#### 1"}]
    assert rows.where(0) == "dataset openai/gsm8k:main (test) row 10"


def test_a_source_that_is_neither_path_nor_hub_name(store: HFDatasetStore) -> None:
    with pytest.raises(DataError, match="is not a bundled name, an existing local file"):
        store.load("what is this?")
