"""Chat converters: validation errors with file:line and field path; no_robots and tulu-3 shapes."""

from __future__ import annotations

from pathlib import Path

import pytest

from cookbook.datasets import (
    chat_row,
    convert_rows,
    converter_for,
    load_chat,
    no_robots_row,
    tulu3_row,
)
from kitchen.adapters.datasets import HFDatasetStore
from kitchen.engine.errors import DataError
from tests.datasets.helpers import HubFromFiles, write_jsonl

GOOD = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}


def load_error(tmp_path: Path, bad_row: object) -> str:
    """The DataError message for a file whose third line is `bad_row`."""
    path = write_jsonl(tmp_path / "chat.jsonl", [GOOD, GOOD, bad_row])
    with pytest.raises(DataError) as caught:
        load_chat(HFDatasetStore(), str(path))
    return str(caught.value)


def test_unknown_role_names_file_line_and_field(tmp_path: Path) -> None:
    bad = {
        "messages": [
            {"role": "user", "content": "a"},
            {"role": "assistant", "content": "b"},
            {"role": "assitant", "content": "c"},
        ]
    }
    assert load_error(tmp_path, bad) == (
        f'dataset file {tmp_path / "chat.jsonl"}:3: field "messages"[2].role is "assitant"; '
        "expected one of system, user, assistant, tool"
    )


def test_missing_messages(tmp_path: Path) -> None:
    message = load_error(tmp_path, {"conversation": []})
    assert message.endswith('chat.jsonl:3: field "messages" is missing; expected a non-empty '
                            'array of {"role", "content"} messages')  # fmt: skip


def test_non_string_content(tmp_path: Path) -> None:
    bad = {"messages": [{"role": "user", "content": 42}, {"role": "assistant", "content": "x"}]}
    assert load_error(tmp_path, bad).endswith(
        ':3: field "messages"[0].content is 42; expected a string'
    )
    bad = {"messages": [{"role": "user", "content": ["part"]}]}
    assert "is an array; expected a string" in load_error(tmp_path, bad)


def test_other_malformed_conversations(tmp_path: Path) -> None:
    assert 'field "messages" is empty' in load_error(tmp_path, {"messages": []})
    assert 'field "messages" is "hi"; expected a non-empty array' in load_error(
        tmp_path, {"messages": "hi"}
    )
    assert 'field "messages"[0].role is missing' in load_error(
        tmp_path, {"messages": [{"content": "x"}]}
    )
    assert "has no assistant message" in load_error(
        tmp_path, {"messages": [{"role": "user", "content": "x"}]}
    )


def test_chat_row_keeps_only_message_fields_and_known_extras() -> None:
    row = {
        "messages": [
            {"role": "system", "content": "s", "junk": 1},
            {"role": "assistant", "content": None, "tool_calls": [{"id": "1"}]},
            {"role": "tool", "content": "42", "tool_call_id": "1", "name": "calc"},
        ]
    }
    assert chat_row(row)["messages"] == [
        {"role": "system", "content": "s"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "1"}]},
        {"role": "tool", "content": "42", "tool_call_id": "1", "name": "calc"},
    ]


NO_ROBOTS = {
    "prompt": "Write a haiku about bread.",
    "prompt_id": "abc123",
    "messages": [
        {"role": "system", "content": "You are a poet."},
        {"role": "user", "content": "Write a haiku about bread."},
        {"role": "assistant", "content": "Warm crust, soft crumb..."},
    ],
    "category": "Generation",
}
TULU = {
    "id": "oasst1_42",
    "messages": [
        {"role": "user", "content": "What is 2+2?"},
        {"role": "assistant", "content": "4"},
    ],
    "source": "ai2-adapt-dev/oasst1_converted",
}


def test_no_robots_and_tulu3_rows_from_local_files(tmp_path: Path) -> None:
    store = HubFromFiles(
        {
            ("HuggingFaceH4/no_robots", "test"): write_jsonl(tmp_path / "nr.jsonl", [NO_ROBOTS]),
            ("allenai/tulu-3-sft-mixture", "train"): write_jsonl(tmp_path / "tulu.jsonl", [TULU]),
        }
    )
    [nr] = load_chat(store, "no_robots", "test")
    assert nr == {"messages": NO_ROBOTS["messages"], "category": "Generation"}
    [tulu] = load_chat(store, "allenai/tulu-3-sft-mixture")
    assert tulu == {"messages": TULU["messages"], "id": "oasst1_42", "source": TULU["source"]}
    assert store.loaded == [
        ("HuggingFaceH4/no_robots", "test"),
        ("allenai/tulu-3-sft-mixture", "train"),
    ]


def test_converter_choice_by_source() -> None:
    assert converter_for("HuggingFaceH4/no_robots", "chat") is no_robots_row
    assert converter_for("tulu3", "chat") is tulu3_row
    assert converter_for("bundled:chat", "chat") is chat_row
    assert converter_for("my/data.jsonl", "chat") is chat_row
    with pytest.raises(DataError, match="holds comparison rows; expected chat rows"):
        converter_for("Anthropic/hh-rlhf", "chat")


def test_convert_rows_without_locations_names_row_index() -> None:
    with pytest.raises(DataError, match=r'^row 1: field "messages" is missing'):
        convert_rows([GOOD, {}], chat_row)
