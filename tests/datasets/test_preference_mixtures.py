"""The Tulu3 preference mixture, LMArena's human preferences and HelpSteer2 as comparison rows, on
hand-made rows in their hub shapes; each as tinker-cookbook's converter reads the same row."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cookbook.datasets.catalog import converter_for, load_comparisons, resolve_source
from cookbook.datasets.comparison import arena_row, helpsteer2_pairs, tulu3_preference_row
from kitchen.engine.errors import DataError
from tests.datasets.helpers import HubFromFiles, write_jsonl

upstream = pytest.importorskip("tinker_cookbook.recipes.preference.datasets")


def _cookbook(builder: str, row: dict[str, Any]) -> dict[str, Any] | None:
    """tinker-cookbook's conversion of `row` (its builders' per-row method reads no settings)."""
    labeled = getattr(upstream, builder).example_to_labeled_comparison(None, row)
    if labeled is None:
        return None
    c = labeled.comparison
    return {"prompt_conversation": c.prompt_conversation, "completion_A": c.completion_A,
            "completion_B": c.completion_B, "label": labeled.label}  # fmt: skip


def _msg(role: str, text: str) -> dict[str, str]:
    return {"role": role, "content": text}


TULU = {
    "id": "allenai/tulu-3-sft-reused-on-policy-8b_1",
    "source": "allenai/tulu-3-sft-reused-on-policy-8b",
    "prompt": "Name a prime number above 10.",
    "chosen": [_msg("user", "Name a prime number above 10."), _msg("assistant", "11 is prime.")],
    "rejected": [_msg("user", "Name a prime number above 10."), _msg("assistant", "12.")],
}


def test_tulu3_preference_rows_as_the_cookbook_reads_them() -> None:
    row = tulu3_preference_row(TULU, "row 0")
    assert row == _cookbook("Tulu38BComparisonBuilder", TULU)
    assert row["completion_A"] == [_msg("assistant", "11 is prime.")] and row["label"] == "A"
    assert resolve_source("tulu3_preference") == "allenai/llama-3.1-tulu-3-8b-preference-mixture"
    truncated = {**TULU, "rejected": [_msg("user", "Name a prime number above 10.")]}
    with pytest.raises(DataError, match=r'row 7: field "rejected"\[1\] is .*expected an assistant'):
        tulu3_preference_row(truncated, "row 7")


def _part(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text, "image": None, "mimeType": None}


def _arena(winner: str, *, image: bool = False, turns: int = 1) -> dict[str, Any]:
    def conversation(answer: str) -> list[dict[str, Any]]:
        out = []
        for t in range(turns):
            question = [_part(f"question {t}"), _part("(be brief)")]
            if image and t == 0:
                question.append({"type": "image", "text": None, "image": {"url": "x.png"}})
            out += [{"role": "user", "content": question, "num_tokens": 5},
                    {"role": "assistant", "content": [_part(f"{answer} {t}")], "num_tokens": 3}]  # fmt: skip
        return out

    return {"id": "e1", "model_a": "m-a", "model_b": "m-b", "winner": winner,
            "evaluation_order": 1, "language": "en", "is_code": False,
            "conversation_a": conversation("alpha"), "conversation_b": conversation("beta"),
            "full_conversation": [], "conv_metadata": {}, "category_tag": {}}  # fmt: skip


@pytest.mark.parametrize(
    "row",
    [_arena("model_a"), _arena("model_b"), _arena("model_b", turns=2), _arena("tie"),
     _arena("both_bad"), _arena("model_a", image=True)],
    ids=["a", "b", "two-turns", "tie", "both-bad", "image"],
)  # fmt: skip
def test_arena_rows_as_the_cookbook_reads_them(row: dict[str, Any]) -> None:
    assert arena_row(row, "row 0") == _cookbook("ArenaComparisonBuilder", row)


def test_arena_labels_the_winner_and_keeps_the_first_message_as_the_prompt() -> None:
    one = arena_row(_arena("model_b"), "row 0")
    assert one is not None and one["label"] == "B"
    assert one["prompt_conversation"] == [_msg("user", "question 0 (be brief)")]
    assert one["completion_B"] == [_msg("assistant", "beta 0")]
    two = arena_row(_arena("model_a", turns=2), "row 0")
    assert two is not None and [m["role"] for m in two["completion_A"]] == [
        "assistant", "user", "assistant"]  # fmt: skip
    assert arena_row(_arena("tie"), "row 0") is None
    with pytest.raises(DataError, match=r'row 3: field "winner" is an array'):
        arena_row({**_arena("model_a"), "winner": ["model_a"]}, "row 3")


def _helpsteer(prompt: str, response: str, helpfulness: int) -> dict[str, Any]:
    return {"prompt": prompt, "response": response, "helpfulness": helpfulness,
            "correctness": 3, "coherence": 4, "complexity": 1, "verbosity": 2}  # fmt: skip


HELPSTEER = [
    _helpsteer("P1", "good", 3), _helpsteer("P1", "bad", 1),
    _helpsteer("P2", "same", 2), _helpsteer("P2", "alike", 2),  # a tie: no comparison
    _helpsteer("P3", "middling", 2), _helpsteer("P3", "best", 4), _helpsteer("P3", "worst", 1),
    _helpsteer("P4", "alone", 4),  # one response: nothing to compare
]  # fmt: skip


def test_helpsteer2_pairs_each_prompts_best_against_its_worst(tmp_path: Path) -> None:
    store = HubFromFiles(
        {("nvidia/HelpSteer2", "train"): write_jsonl(tmp_path / "h.jsonl", HELPSTEER)}
    )
    rows = load_comparisons(store, "helpsteer2")
    got = [(r["prompt_conversation"][0]["content"], r["completion_A"][0]["content"],
            r["completion_B"][0]["content"], r["helpfulness_diff"]) for r in rows]  # fmt: skip
    assert got == [("P1", "good", "bad", 2), ("P3", "best", "worst", 3)]
    assert all(r["label"] == "A" for r in rows)
    paired = helpsteer2_pairs.group(HELPSTEER, lambda i: f"row {i}")
    for pair, row in zip(paired, rows, strict=True):  # the cookbook's conversion of its pairs
        expected = _cookbook("HelpSteer2ComparisonBuilder", pair)
        assert expected == {k: v for k, v in row.items() if k != "helpfulness_diff"}
    assert converter_for("nvidia/HelpSteer2", "comparison") is helpsteer2_pairs


def test_a_helpsteer2_row_without_a_score_names_its_line(tmp_path: Path) -> None:
    bad = [*HELPSTEER[:2], {"prompt": "P9", "response": "x", "helpfulness": "high"}]
    store = HubFromFiles({("nvidia/HelpSteer2", "train"): write_jsonl(tmp_path / "h.jsonl", bad)})
    with pytest.raises(
        DataError, match=r'h\.jsonl:3: field "helpfulness" is "high"; expected an int'
    ):
        load_comparisons(store, "helpsteer2")


def test_the_dpo_recipe_loads_helpsteer2_pairs(tmp_path: Path) -> None:
    """The recipes' own dataset stage (LoadDataset) groups the rows too."""
    from kitchen.app.launch import run

    files = {("nvidia/HelpSteer2", "train"): write_jsonl(tmp_path / "h.jsonl", HELPSTEER),
             ("nvidia/HelpSteer2", "validation"): write_jsonl(tmp_path / "v.jsonl", HELPSTEER)}  # fmt: skip
    store = HubFromFiles(files)
    values = {"dataset": "helpsteer2", "batch_size": 1, "no_register": True, "eval_every": 0}
    result = run("dpo", values, backend="fake", datasets=store, max_steps=1)
    assert [c["completion_A"][0]["content"] for c in result.state.comparisons] == ["good", "best"]
    assert store.loaded == [("nvidia/HelpSteer2", "train"), ("nvidia/HelpSteer2", "validation")]
