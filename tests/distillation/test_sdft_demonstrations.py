"""SDFT's SciKnowEval and ToolAlpaca sets: on the same rows (the bundled slices, hand-made in the
hub's shapes, and the paper's preprocessed ToolAlpaca shape) the sdft recipe's (question, golden
answer) pairs, train and held out, equal tinker-cookbook 0.6.1's load_sciknoweval and
load_toolalpaca (their hub loaders replaced by the same rows); bad rows and an absent domain are
one clear error; and a 2-step fake-backend run on each bundled set."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cookbook.datasets.catalog import converter_for
from cookbook.datasets.demonstrations import sciknoweval_row, toolalpaca_row
from cookbook.recipes.sdft import Demonstrations
from kitchen.adapters.datasets import HFDatasetStore
from kitchen.adapters.fake import FakeBackend
from kitchen.app.launch import run
from kitchen.engine.errors import DataError
from train_core.rl.types import RLEnvContext

cookbook_datasets = pytest.importorskip("tinker_cookbook.recipes.sdft.datasets")

DATA = Path(__file__).resolve().parents[2] / "cookbook" / "data"


def bundled_rows(name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (DATA / f"{name}.jsonl").read_text().splitlines()]


def our_pairs(dataset: str, **kw: Any) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """The recipe's train and held-out (question, golden answer) pairs."""
    make = Demonstrations(dataset, None, groups_per_batch=100, group_size=1, test_demos=100, **kw)
    train, test = make(RLEnvContext(renderer=None, tokenizer=None, datasets=HFDatasetStore()))
    return train.items, test.items if test is not None else []


def their_pairs(loaded: tuple[list[str], list[str], list[str], list[str]]) -> tuple[list, list]:
    train_q, train_a, test_q, test_a = loaded
    return list(zip(train_q, train_a, strict=True)), list(zip(test_q, test_a, strict=True))


@pytest.mark.parametrize(("domain", "n_train", "n_test"), [("Chemistry", 9, 1), ("Physics", 1, 1)])
def test_sciknoweval_pairs_equal_the_cookbooks(monkeypatch, domain, n_train, n_test) -> None:
    rows = bundled_rows("sciknoweval")
    monkeypatch.setattr(cookbook_datasets, "load_dataset", lambda name, split: rows)
    theirs = their_pairs(cookbook_datasets.load_sciknoweval(domain=domain))
    ours = our_pairs("sciknoweval", domain=domain)
    assert ours == theirs
    assert (len(ours[0]), len(ours[1])) == (n_train, n_test)  # the L2 and true/false rows are out
    question, answer = ours[0][0]
    assert "\nA: " in question and "<answer>X</answer>" in question and answer in "ABCD"


def test_toolalpaca_pairs_equal_the_cookbooks_from_the_hub_shape(monkeypatch) -> None:
    rows = bundled_rows("toolalpaca")
    monkeypatch.setattr(cookbook_datasets, "load_dataset", lambda name, split: rows)
    theirs = their_pairs(cookbook_datasets.load_toolalpaca())
    ours = our_pairs("toolalpaca")
    assert ours == theirs and (len(ours[0]), len(ours[1])) == (7, 1)


def test_toolalpaca_pairs_equal_the_cookbooks_from_the_papers_shape(monkeypatch, tmp_path) -> None:
    def paper_row(i: int) -> dict[str, Any]:
        if i % 2:  # a response of several lines, as a list
            return {"prompt": f"Use the API for question {i}.", "golden_response": [f"Action: a{i}", f"Action Input: {i}"]}  # fmt: skip
        return {"prompt": f"Question {i}", "golden_response": f"Final answer {i}"}

    rows = [paper_row(i) for i in range(11)]
    path = tmp_path / "tooluse.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    monkeypatch.setattr(cookbook_datasets, "load_from_disk", lambda p: rows)
    theirs = their_pairs(cookbook_datasets.load_toolalpaca(data_path="arrow-dir"))
    ours = our_pairs("toolalpaca", demo_source=str(path))
    assert ours == theirs and (len(ours[0]), len(ours[1])) == (9, 2)
    assert any("\nAction Input" in a for _, a in ours[0])  # a list response, joined by newlines


def test_hub_names_reach_the_same_converters() -> None:
    assert converter_for("hicai-zju/SciKnowEval", "chat") is sciknoweval_row
    assert converter_for("tangqiaoyu/ToolAlpaca", "chat") is toolalpaca_row


def test_bad_rows_and_an_absent_domain_are_one_clear_error() -> None:
    good = bundled_rows("sciknoweval")[0]
    with pytest.raises(DataError, match=r"data\.jsonl:3.*\"question\""):
        sciknoweval_row({**good, "question": None}, "data.jsonl:3")
    with pytest.raises(DataError, match=r"row 2.*\"instruction\""):
        toolalpaca_row({"output": "x"}, "row 2")
    assert sciknoweval_row({**good, "type": "true_or_false"}, "r") is None
    with pytest.raises(DataError, match=r"domain 'Biology'; domains there: Chemistry, Physics"):
        our_pairs("sciknoweval", domain="Biology")


@pytest.mark.parametrize("dataset", ["sciknoweval", "toolalpaca"])
def test_two_steps_on_each_bundled_set(dataset) -> None:
    fake = FakeBackend()
    overrides = {"save_every": 0, "no_register": True, "num_batches": 2, "groups_per_batch": 2,
                 "max_tokens": 16, "dataset": dataset, "eval_every": 1}  # fmt: skip
    result = run("sdft", overrides, backend=fake)
    assert result.steps == 2
    assert len([m for m in result.metrics if "test/teacher_ce" in m]) == 3
