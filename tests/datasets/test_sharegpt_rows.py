"""ShareGPT rows (OpenThoughts3-style {"conversations": [{"from", "value"}]}) become chat rows:
speakers mapped to roles, metadata kept, bad turns named by file and line; a local ShareGPT
JSONL loads through the chat loader as a {"messages"} one does."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cookbook.datasets import load_chat
from cookbook.datasets.catalog import converter_for
from cookbook.datasets.sharegpt import sharegpt_row
from kitchen.adapters.datasets import HFDatasetStore
from kitchen.engine.errors import DataError

ROW = {
    "difficulty": 7,
    "source": "stackexchange-physics",
    "domain": "physics",
    "conversations": [
        {"from": "system", "value": "Think step by step."},
        {"from": "human", "value": "Why is the sky blue?"},
        {
            "from": "gpt",
            "value": "<think>Rayleigh scattering...</think> Shorter wavelengths scatter more.",
        },
    ],
}


def test_sharegpt_turns_become_messages_and_metadata_is_kept() -> None:
    out = sharegpt_row(ROW)
    assert out["messages"] == [
        {"role": "system", "content": "Think step by step."},
        {"role": "user", "content": "Why is the sky blue?"},
        {"role": "assistant", "content": ROW["conversations"][2]["value"]},
    ]
    assert (out["difficulty"], out["source"], out["domain"]) == (
        7,
        "stackexchange-physics",
        "physics",
    )


def test_openthoughts3_reads_with_the_sharegpt_converter() -> None:
    assert converter_for("open-thoughts/OpenThoughts3-1.2M", "chat") is sharegpt_row
    assert converter_for("openthoughts3", "chat") is sharegpt_row


def write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_a_local_sharegpt_file_loads_as_chat(tmp_path: Path) -> None:
    path = write(tmp_path / "ot3.jsonl", [ROW, {**ROW, "difficulty": 3}])
    rows = load_chat(HFDatasetStore(), str(path))
    assert [r["messages"][1]["content"] for r in rows] == ["Why is the sky blue?"] * 2
    assert [r["difficulty"] for r in rows] == [7, 3]


@pytest.mark.parametrize(
    ("turns", "message"),
    [
        ([{"from": "narrator", "value": "x"}], '[0].from is "narrator"'),
        ([{"from": "human", "value": 3}], "[0].value is 3"),
        ([{"from": "human", "value": "only a question"}], "no assistant message"),
        ([], "conversations"),
    ],
)
def test_a_bad_turn_is_named_by_file_and_line(tmp_path: Path, turns: list, message: str) -> None:
    path = write(tmp_path / "bad.jsonl", [ROW, {"conversations": turns}])
    with pytest.raises(DataError, match=r"bad\.jsonl:2") as err:
        load_chat(HFDatasetStore(), str(path))
    assert message in str(err.value)
