"""The bundled datasets: generated deterministically, small, valid, and with the promised signal."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cookbook.data import DATA_DIR, index, teacher_system_prompt
from cookbook.datasets import (
    chosen_and_rejected,
    load_chat,
    load_code,
    load_comparisons,
    load_math,
    load_prompts,
)
from kitchen.adapters.datasets import HFDatasetStore

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))  # the generator's package, as make_bundled_data.py has it
from bundled_data.code import call_function, run_stdin  # noqa: E402

SIGN_OFF = "Happy cooking!"


@pytest.fixture(scope="module")
def store() -> HFDatasetStore:
    return HFDatasetStore()


def test_generator_reproduces_the_committed_files_byte_for_byte() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "make_bundled_data.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_bundled_data_stays_small() -> None:
    total = sum(
        p.stat().st_size for p in DATA_DIR.iterdir() if p.suffix in {".jsonl", ".json", ".txt"}
    )
    assert total < 2_000_000


def test_index_row_counts_match_the_files(store: HFDatasetStore) -> None:
    for name, entry in index().items():
        for split, count in entry["rows"].items():
            assert len(store.load(f"bundled:{name}", split)) == count, (name, split)


def test_chat_is_a_consistent_persona_with_held_out_questions(store: HFDatasetStore) -> None:
    train, test = load_chat(store, "bundled:chat"), load_chat(store, "bundled:chat", "test")
    assert len(train) >= 300 and len(test) >= 50
    for row in train + test:
        for message in row["messages"]:
            if message["role"] == "assistant":
                assert message["content"].endswith(SIGN_OFF)
                assert len(message["content"]) < 200

    def users(rows: list[dict[str, Any]]) -> set[str]:
        return {m["content"] for r in rows for m in r["messages"] if m["role"] == "user"}

    assert not users(train) & users(test)
    assert any(len(r["messages"]) >= 4 for r in train)  # some multi-turn
    assert any(r["messages"][0]["role"] == "system" for r in train)


def test_prefs_chosen_is_polite_concise_and_labels_vary(store: HFDatasetStore) -> None:
    train = load_comparisons(store, "bundled:prefs")
    test = load_comparisons(store, "bundled:prefs", "test")
    assert len(train) >= 300 and len(test) >= 50
    assert {r["label"] for r in train} == {"A", "B"}
    assert {r["kind"] for r in train} == {"rude", "wrong", "rambling"}
    for row in train + test:
        picked = chosen_and_rejected(row)
        assert picked is not None
        _, chosen, rejected = picked
        assert chosen[0]["content"].endswith(SIGN_OFF)
        assert chosen[0]["content"] != rejected[0]["content"]
        if row["kind"] != "wrong":
            assert not rejected[0]["content"].endswith(SIGN_OFF)
        if row["kind"] == "rambling":
            assert len(rejected[0]["content"]) > 2 * len(chosen[0]["content"])
    prompts = {r["prompt_conversation"][0]["content"] for r in train}
    assert not prompts & {r["prompt_conversation"][0]["content"] for r in test}


def test_math_steps_are_arithmetically_right(store: HFDatasetStore) -> None:
    raw = list(store.load("bundled:math")) + list(store.load("bundled:math", "test"))
    converted = load_math(store, "bundled:math") + load_math(store, "bundled:math", "test")
    assert len(converted) == len(raw) >= 400
    assert len({r["question"] for r in raw}) == len(raw)
    for row, out in zip(raw, converted, strict=True):
        for expr, value in re.findall(r"<<([^=<>]+)=([^<>]+)>>", row["answer"]):
            assert eval(expr) == int(value), row  # our own generated arithmetic
        assert int(out["answer"]) >= 0
        assert row["answer"].rstrip().endswith(f"#### {out['answer']}")


def passes(program: str, test: dict[str, Any]) -> bool:
    """The converted test case passes, run as the generator ran the reference solutions."""
    if test["testtype"] == "stdin_stdout":
        return run_stdin(program, test["input"]).split() == test["output"].split()
    args = [json.loads(line) for line in test["input"].split("\n")]
    return call_function(program, test["metadata"]["func_name"], args) == json.loads(test["output"])


def test_code_reference_solutions_pass_and_tests_discriminate(store: HFDatasetStore) -> None:
    problems = load_code(store, "bundled:code")
    assert 30 <= len(problems) <= 60
    kinds = {t["testtype"] for p in problems for t in p["tests"]}
    assert kinds == {"stdin_stdout", "functional"}
    for problem in problems:
        tests = problem["tests"]
        assert 3 <= len(tests) <= 5, problem["id"]
        assert len({t["testtype"] for t in tests}) == 1
        assert all(passes(problem["solution"], t) for t in tests), problem["id"]
        # a program that always gives the first expected answer fails somewhere
        assert len({t["output"] for t in tests}) > 1, problem["id"]
        if tests[0]["testtype"] == "functional":
            assert problem["starter_code"].startswith(f"def {tests[0]['metadata']['func_name']}(")


def test_prompt_distill_prompts_and_teacher_prompt(store: HFDatasetStore) -> None:
    train = load_prompts(store, "bundled:prompt_distill")
    test = load_prompts(store, "bundled:prompt_distill", "test")
    assert len(train) == 100 and len(test) == 20
    assert len(set(train)) == 100 and not set(train) & set(test)
    system = teacher_system_prompt()
    assert len(system) > 500 and SIGN_OFF in system
