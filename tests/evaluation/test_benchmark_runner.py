"""The benchmark runner: pass@k of sampled answers, per checkpoint of a run, in the eval store."""

import asyncio
import json
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from cookbook.evals.benchmarks import BENCHMARKS, boxed_grader, load_problems
from kitchen.app.cli import app
from kitchen.app.launch import run
from kitchen.engine.plugins import DATASET_STORES
from tests.helpers import tiny_sft_config
from train_core.evaluation.benchmark import BenchmarkEvaluator, BenchmarkProblem


class ScriptedClient:
    """Answers problem i with answers[i] (one text per sample), as token ids of its characters."""

    def __init__(self, answers):
        self.answers = answers

    def sample(self, prompt, num_samples, params):
        texts = self.answers[prompt]
        assert len(texts) == num_samples
        seqs = [SimpleNamespace(tokens=[ord(c) for c in t]) for t in texts]
        return SimpleNamespace(result=lambda: SimpleNamespace(sequences=seqs))


class CharRenderer:
    def get_stop_sequences(self):
        return []

    def build_generation_prompt(self, messages):
        return messages[-1]["content"]

    def parse_response(self, tokens):
        return {"role": "assistant", "content": "".join(map(chr, tokens))}, True


def test_pass_at_k_counts_graded_answers_per_problem():
    problems = (BenchmarkProblem([{"role": "user", "content": "p1"}], "3"),
                BenchmarkProblem([{"role": "user", "content": "p2"}], "1/2"))  # fmt: skip
    answers = {"p1": ["\\boxed{3}", "\\boxed{3.0}", "3", "\\boxed{4}"],  # 2 of 4 right (no box: wrong)
               "p2": ["\\boxed{0.4}"] * 4}  # fmt: skip
    evaluator = BenchmarkEvaluator(problems=problems, grade=boxed_grader("numeric"),
                                   prefix="gsm8k", num_samples=4, ks=(1, 2, 4))  # fmt: skip
    metrics = asyncio.run(evaluator(ScriptedClient(answers), renderer=CharRenderer()))
    assert metrics["gsm8k/pass@1"] == pytest.approx((2 / 4 + 0) / 2)
    assert metrics["gsm8k/pass@2"] == pytest.approx((1 - 1 / 6 + 0) / 2)  # 1 - C(2,2)/C(4,2)
    assert metrics["gsm8k/pass@4"] == pytest.approx(0.5)
    assert metrics["gsm8k/num_problems"] == 2


def test_k_above_the_sample_count_is_refused():
    with pytest.raises(ValueError, match="pass@4 needs"):
        BenchmarkEvaluator(problems=(), grade=boxed_grader("numeric"), prefix="x",
                           num_samples=2, ks=(1, 4))  # fmt: skip


@pytest.mark.parametrize("name", sorted(BENCHMARKS))
def test_each_benchmark_has_an_offline_slice_whose_reference_answers_grade_right(name):
    problems = load_problems(name, DATASET_STORES.get("hf")())
    assert len(problems) >= 4
    grade = boxed_grader(BENCHMARKS[name].grader)
    assert all(grade(f"so \\boxed{{{p.answer}}}", p.answer) for p in problems)
    assert not any(grade("no box here", p.answer) for p in problems)


@pytest.mark.slow
def test_the_runner_writes_pass_at_k_for_every_checkpoint_of_a_tiny_run(tmp_path):
    log_dir = tmp_path / "run"
    cfg = tiny_sft_config(tmp_path, batch_size=4, num_samples_to_show=0, eval_every=0,
                          test_dataset=None, save_every=2, no_register=True)  # fmt: skip
    run("sl_basic", cfg, log_dir=log_dir, max_steps=4)
    saved = [
        json.loads(x)["name"] for x in (log_dir / "checkpoints.jsonl").read_text().splitlines()
    ]
    args = ["eval", str(log_dir), "--harness", "benchmark", "--tasks", "gsm8k,math500",
            "--limit", "2", "--num-samples", "2", "--k", "1,2", "--max-tokens", "8"]  # fmt: skip
    first = CliRunner().invoke(app, args)
    assert first.exit_code == 0, first.output
    store = [json.loads(x) for x in (log_dir / "eval_store.jsonl").read_text().splitlines()]
    assert sorted((r["checkpoint"], r["benchmark"]) for r in store) == sorted(
        (c, b) for c in saved for b in ("gsm8k", "math500")
    )
    for r in store:
        b = r["benchmark"]
        assert {f"{b}/pass@1", f"{b}/pass@2"} <= set(r["metrics"])
        assert 0 <= r["metrics"][f"{b}/pass@1"] <= r["metrics"][f"{b}/pass@2"] <= 1
        assert r["metrics"][f"{b}/num_problems"] == 2
    again = CliRunner().invoke(app, args)  # the same settings: nothing new to score
    assert again.exit_code == 0 and "0 new result(s)" in again.output
    assert len((log_dir / "eval_store.jsonl").read_text().splitlines()) == len(store)


def test_an_unknown_benchmark_names_itself(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"config": {"model_name": "kitchen/tiny-llama",
                                                                 "backend": "fake"}}))  # fmt: skip
    (tmp_path / "checkpoints.jsonl").write_text("")
    out = CliRunner().invoke(
        app, ["eval", str(tmp_path), "--harness", "benchmark", "--tasks", "gsm9k"]
    )
    assert out.exit_code == 2 and "unknown eval task 'gsm9k'" in out.output
