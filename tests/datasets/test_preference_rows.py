"""Preference converters on local files in the upstream row shapes, and the comparison schema."""

from __future__ import annotations

from pathlib import Path

import pytest

from cookbook.datasets import (
    chosen_and_rejected,
    comparison_row,
    load_comparisons,
    parse_hh_transcript,
    preference_row,
    swapped,
)
from kitchen.adapters.datasets import HFDatasetStore
from kitchen.engine.errors import DataError
from tests.datasets.helpers import HubFromFiles, write_jsonl

HH_GOOD = {
    "chosen": "\n\nHuman: How do I boil an egg?\n\nAssistant: Put it in boiling water."
    "\n\nHuman: For how long?\n\nAssistant: About ten minutes for a firm yolk.",
    "rejected": "\n\nHuman: How do I boil an egg?\n\nAssistant: Put it in boiling water."
    "\n\nHuman: For how long?\n\nAssistant: Figure it out.",
}
HH_MISMATCHED = {  # the prompts differ: tinker-cookbook drops such rows
    "chosen": "\n\nHuman: A?\n\nAssistant: yes",
    "rejected": "\n\nHuman: B?\n\nAssistant: no",
}
HH_SINGLE = {
    "chosen": "\n\nHuman: Say Human: twice\n\nAssistant: Human: Human:",
    "rejected": "\n\nHuman: Say Human: twice\n\nAssistant: No.",
}


def test_hh_rlhf_transcripts_become_shared_prompt_and_two_completions(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "hh.jsonl", [HH_GOOD, HH_MISMATCHED, HH_SINGLE])
    store = HubFromFiles({("Anthropic/hh-rlhf", "test"): path})
    first, second = load_comparisons(store, "hhh", "test")
    assert first["prompt_conversation"] == [
        {"role": "user", "content": "How do I boil an egg?"},
        {"role": "assistant", "content": "Put it in boiling water."},
        {"role": "user", "content": "For how long?"},
    ]
    assert first["completion_A"] == [
        {"role": "assistant", "content": "About ten minutes for a firm yolk."}
    ]
    assert first["completion_B"] == [{"role": "assistant", "content": "Figure it out."}]
    assert first["label"] == "A"
    # "Human:" inside a turn is content, not a new turn
    assert second["prompt_conversation"] == [{"role": "user", "content": "Say Human: twice"}]
    assert second["completion_A"][0]["content"] == "Human: Human:"


def test_hh_parser_reads_roles_in_order() -> None:
    turns = parse_hh_transcript("Human: hi\n\nAssistant: hello")
    assert turns == [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]


HS3 = [
    {"domain": "general", "language": "english", "context": [{"role": "user", "content": "Q1"}],
     "response1": "r1", "response2": "r2", "overall_preference": -2},
    {"domain": "code", "language": "english",
     "context": [{"role": "user", "content": "Q2"}, {"role": "assistant", "content": "a"},
                 {"role": "user", "content": "more"}],
     "response1": "r1", "response2": "r2", "overall_preference": 3},
    {"domain": "stem", "language": "english", "context": [{"role": "user", "content": "Q3"}],
     "response1": "same", "response2": "same-ish", "overall_preference": 0},
]  # fmt: skip


def test_helpsteer3_labels_follow_overall_preference(tmp_path: Path) -> None:
    store = HubFromFiles(
        {("nvidia/HelpSteer3:preference", "train"): write_jsonl(tmp_path / "hs3.jsonl", HS3)}
    )
    rows = load_comparisons(store, "helpsteer3")
    assert [r["label"] for r in rows] == ["A", "B"]  # negative prefers response1; the tie dropped
    assert rows[1]["prompt_conversation"] == HS3[1]["context"]
    assert rows[0]["completion_A"] == [{"role": "assistant", "content": "r1"}]
    assert [r["label"] for r in load_comparisons(store, "helpsteer3", drop_ties=False)] == [
        "A", "B", "Tie",
    ]  # fmt: skip


def test_helpsteer3_preference_out_of_range_names_the_field(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "hs3.jsonl", [HS3[0], {**HS3[0], "overall_preference": 5}])
    store = HubFromFiles({("nvidia/HelpSteer3:preference", "train"): path})
    with pytest.raises(
        DataError,
        match=r'hs3.jsonl:2: field "overall_preference" is 5; expected an integer in -3..3',
    ):
        load_comparisons(store, "nvidia/HelpSteer3")


def test_ultrafeedback_rows(tmp_path: Path) -> None:
    row = {"source": "evol", "instruction": "Name a fruit.", "chosen_response": "Apple.",
           "chosen_avg_rating": 5.0, "rejected_response": "Car.", "rejected_avg_rating": 1.0}  # fmt: skip
    path = write_jsonl(tmp_path / "uf.jsonl", [row, {"instruction": "x", "chosen_response": "y"}])
    store = HubFromFiles({("argilla/ultrafeedback-binarized-preferences", "train"): path})
    with pytest.raises(DataError, match=r'uf.jsonl:2: field "rejected_response" is missing'):
        load_comparisons(store, "ultrafeedback")
    [comparison] = load_comparisons(
        HubFromFiles(
            {
                ("argilla/ultrafeedback-binarized-preferences", "train"): write_jsonl(
                    tmp_path / "ok.jsonl", [row]
                )
            }
        ),
        "ultrafeedback",
    )
    assert chosen_and_rejected(comparison) == (
        [{"role": "user", "content": "Name a fruit."}],
        [{"role": "assistant", "content": "Apple."}],
        [{"role": "assistant", "content": "Car."}],
    )


def test_local_files_in_any_preference_shape(tmp_path: Path) -> None:
    rows = [
        {"prompt": "Q", "chosen": "good", "rejected": "bad"},
        {"chosen": [{"role": "user", "content": "Q"}, {"role": "assistant", "content": "good"}],
         "rejected": [{"role": "user", "content": "Q"}, {"role": "assistant", "content": "bad"}]},
        HH_GOOD,
        {"prompt_conversation": [{"role": "user", "content": "Q"}],
         "completion_A": [{"role": "assistant", "content": "bad"}],
         "completion_B": [{"role": "assistant", "content": "good"}], "label": "B"},
    ]  # fmt: skip
    path = write_jsonl(tmp_path / "mixed.jsonl", rows)
    loaded = load_comparisons(HFDatasetStore(), str(path))
    chosen = [chosen_and_rejected(c)[1][-1]["content"] for c in loaded]  # type: ignore[index]
    assert chosen == ["good", "good", "About ten minutes for a firm yolk.", "good"]


def test_comparison_schema_errors_and_swap() -> None:
    row = {"prompt_conversation": [{"role": "user", "content": "Q"}],
           "completion_A": [{"role": "assistant", "content": "a"}],
           "completion_B": [{"role": "assistant", "content": "b"}], "label": "C"}  # fmt: skip
    with pytest.raises(DataError, match=r'^x:7: field "label" is "C"; expected one of A, B, Tie'):
        comparison_row(row, "x:7")
    with pytest.raises(DataError, match=r'field "completion_B"\[0\].role is "bot"'):
        comparison_row(
            {**row, "label": "A", "completion_B": [{"role": "bot", "content": "b"}]}, "x"
        )
    flipped = swapped({**row, "label": "A"})
    assert flipped["label"] == "B" and flipped["completion_A"] == row["completion_B"]
    assert chosen_and_rejected({**row, "label": "Tie"}) is None
    with pytest.raises(DataError, match="none of the preference shapes"):
        preference_row({"text": "x"}, "row 0")
