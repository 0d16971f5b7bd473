"""GSM8K and DeepCoder converters on local files in their upstream row shapes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cookbook.datasets import deepcoder_row, extract_gsm8k_answer, load_code, load_math
from kitchen.engine.errors import DataError
from tests.datasets.helpers import HubFromFiles, write_jsonl

GSM8K = {
    "question": "Natalia sold clips to 48 of her friends in April, and then she sold half as many "
    "clips in May. How many clips did Natalia sell altogether in April and May?",
    "answer": "Natalia sold 48/2 = <<48/2=24>>24 clips in May.\n"
    "Natalia sold 48+24 = <<48+24=72>>72 clips altogether in April and May.\n#### 72",
}


def test_gsm8k_rows_from_a_local_file(tmp_path: Path) -> None:
    big = {"question": "How many?", "answer": "It is 1,000 + 234.\n#### 1,234"}
    store = HubFromFiles(
        {("openai/gsm8k:main", "test"): write_jsonl(tmp_path / "g.jsonl", [GSM8K, big])}
    )
    first, second = load_math(store, "gsm8k", "test")
    assert first["question"] == GSM8K["question"]
    assert first["answer"] == "72"
    assert first["solution"] == (
        "Natalia sold 48/2 = 24 clips in May.\nNatalia sold 48+24 = 72 clips altogether in April and May."
    )
    assert second["answer"] == "1234"


def test_gsm8k_answer_without_final_line_names_the_field(tmp_path: Path) -> None:
    store = HubFromFiles(
        {
            ("openai/gsm8k:main", "train"): write_jsonl(
                tmp_path / "g.jsonl", [{"question": "q", "answer": "42"}]
            )
        }
    )
    with pytest.raises(
        DataError,
        match=r'g.jsonl:1: field "answer" is "42"; expected a solution ending in "#### N"',
    ):
        load_math(store, "openai/gsm8k")
    assert extract_gsm8k_answer("steps\n#### : 7") == "7"


LCB_ROW = {  # lcbv5: tests as a JSON string, LiveCodeBench layout
    "problem": "Return the sum of a list.",
    "starter_code": "class Solution:\n    def total(self, nums: List[int]) -> int:\n        ",
    "tests": json.dumps([
        {"input": "[1, 2, 3]", "output": "6", "testtype": "functional", "metadata": {"func_name": "total"}},
        {"input": "[]", "output": "0", "testtype": "functional", "metadata": {"func_name": "total"}},
    ]),
    "metadata": json.dumps({"func_name": "total"}),
}  # fmt: skip
LCB_STDIN_ROW = {
    "problem": "Print a+b.",
    "starter_code": "",
    "tests": json.dumps([{"input": "1 2\n", "output": "3\n", "testtype": "stdin", "metadata": {}}]),
    "metadata": "{}",
}
PRIME_ROW = {  # primeintellect: values, TACO-wrapped outputs, "type" and "fn_name"
    "problem": "Add two numbers.",
    "tests": json.dumps([
        {"type": "function_call", "fn_name": "add", "input": [1, 2], "output": [3]},
        {"type": "function_call", "fn_name": "add", "input": [[1], [2]], "output": [[1, 2]]},
    ]),
}  # fmt: skip
TACO_ROW = {
    "problem": "Echo the line.",
    "tests": json.dumps({"inputs": ["abc\n", "x\n"], "outputs": ["abc\n", "x\n"]}),
}


def test_deepcoder_rows_in_every_test_layout(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "dc.jsonl", [LCB_ROW, LCB_STDIN_ROW, PRIME_ROW, TACO_ROW])
    store = HubFromFiles({("agentica-org/DeepCoder-Preview-Dataset:lcbv5", "train"): path})
    lcb, lcb_stdin, prime, taco = load_code(store, "agentica-org/DeepCoder-Preview-Dataset:lcbv5")
    assert lcb["starter_code"] == LCB_ROW["starter_code"]
    assert lcb["tests"][0] == {"input": "[1, 2, 3]", "output": "6", "testtype": "functional",
                               "metadata": {"func_name": "total"}}  # fmt: skip
    assert lcb_stdin["starter_code"] is None
    assert lcb_stdin["tests"] == [{"input": "1 2\n", "output": "3\n", "testtype": "stdin_stdout",
                                   "metadata": {"func_name": None}}]  # fmt: skip
    assert [(t["input"], t["output"]) for t in prime["tests"]] == [
        ("1\n2", "3"),
        ("[1]\n[2]", "[1, 2]"),
    ]
    assert prime["tests"][0]["metadata"] == {"func_name": "add"}
    assert [t["testtype"] for t in taco["tests"]] == ["stdin_stdout", "stdin_stdout"]
    assert taco["tests"][1]["output"] == "x\n"


def test_converted_rows_convert_to_themselves() -> None:
    once = deepcoder_row(LCB_ROW, "row 0")
    assert once is not None
    assert deepcoder_row(once, "row 0") == once


def test_taco_function_tests_use_fn_name() -> None:
    row = {"problem": "p", "tests": {"inputs": [[1, 2]], "outputs": [[3]], "fn_name": "add"}}
    converted = deepcoder_row(row)
    assert converted is not None
    assert converted["tests"] == [{"input": "1\n2", "output": "3", "testtype": "functional",
                                   "metadata": {"func_name": "add"}}]  # fmt: skip


def test_malformed_code_rows_name_the_field(tmp_path: Path) -> None:
    bad_type = {
        "problem": "p",
        "tests": [
            {"input": "1", "output": "1"},
            {"input": "1", "output": "1", "testtype": "weird"},
        ],
    }
    with pytest.raises(
        DataError, match=r'^r: field "tests"\[1\].testtype is "weird"; expected one of stdin'
    ):
        deepcoder_row(bad_type, "r")
    no_name = {"problem": "p", "tests": [{"input": "1", "output": "1", "testtype": "functional"}]}
    with pytest.raises(DataError, match=r'field "tests"\[0\].metadata.func_name is missing'):
        deepcoder_row(no_name, "r")
    with pytest.raises(DataError, match=r'field "tests" is not valid JSON'):
        deepcoder_row({"problem": "p", "tests": "[{"}, "r")
    with pytest.raises(DataError, match=r'field "problem" is missing'):
        deepcoder_row({"tests": []}, "r")
    assert deepcoder_row({"problem": "p", "tests": "[]"}, "r") is None  # no tests: skipped


def test_local_code_files_raise_but_known_hub_data_skips_broken_rows(tmp_path: Path) -> None:
    broken = {"problem": "p", "tests": "[{"}
    path = write_jsonl(tmp_path / "c.jsonl", [LCB_STDIN_ROW, broken])
    with pytest.raises(DataError, match=r'c.jsonl:2: field "tests" is not valid JSON'):
        load_code(HubFromFiles({(str(path), "train"): path}), str(path))
    store = HubFromFiles({("agentica-org/DeepCoder-Preview-Dataset:taco", "train"): path})
    assert len(load_code(store, "agentica-org/DeepCoder-Preview-Dataset:taco")) == 1
