"""Several evaluators per workflow, each at its own cadence: chat_sl's held-out NLL every
eval_every steps and its inline_evals every infrequent_eval_every steps, both in metrics.jsonl."""

import json

import pytest

from kitchen.app.launch import run
from kitchen.app.resolve import resolve_config
from kitchen.engine.errors import ConfigError
from kitchen.workflows.common.evaluate import Scheduled, scheduled_evaluations
from tests.helpers import tiny_sft_config
from train_core.supervised.evaluator import NLLEvaluator


def _records(log_dir):
    return [json.loads(line) for line in (log_dir / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.slow
def test_two_evaluators_run_at_cadences_two_and_three_on_the_tiny_model(tmp_path):
    cfg = tiny_sft_config(tmp_path, held_out=True, batch_size=4, num_samples_to_show=0,
                          eval_every=2, infrequent_eval_every=3, inline_evals="labels",
                          sample_max_tokens=4, save_every=0, no_register=True)  # fmt: skip
    log_dir = tmp_path / "run"
    result = run("chat_sl", cfg, log_dir=log_dir, max_steps=6)
    eval_results = result.state.eval_results  # type: ignore[attr-defined]
    records = _records(log_dir)
    nll_steps = [r["step"] for r in records if "test/nll" in r and "train_mean_nll" in r]
    label_steps = [r["step"] for r in records if "labels/accuracy" in r and "train_mean_nll" in r]
    assert nll_steps == [0, 2, 4]
    assert label_steps == [0, 3]
    # both report at the end too, each under its own prefix
    assert {"test/nll", "labels/accuracy"} <= set(eval_results)


def test_inline_evals_off_leaves_the_default_graph_as_it_was():
    plain = resolve_config("chat_sl", values={"model_name": "kitchen/tiny-llama"})
    names = [type(n).__name__ for n in plain.workflow.nodes]
    assert "evaluate_labels" not in {getattr(n, "name", "") for n in plain.workflow.nodes}
    assert names.count("Evaluate") == 1  # the final held-out NLL only


def test_an_unknown_inline_eval_is_one_clear_error():
    bad = resolve_config(
        "chat_sl", values={"model_name": "kitchen/tiny-llama", "inline_evals": "nope"}
    )
    with pytest.raises(ConfigError, match="inline_evals: unknown evaluator 'nope'"):
        _ = bad.workflow


def test_two_scheduled_evaluators_with_one_stage_name_are_refused():
    twice = [Scheduled(NLLEvaluator(prefix="a"), 2), Scheduled(NLLEvaluator(prefix="b"), 3)]
    with pytest.raises(ValueError, match="evaluate_nll"):
        scheduled_evaluations(twice)
    named = [
        Scheduled(NLLEvaluator(prefix="a"), 2),
        Scheduled(NLLEvaluator(prefix="b"), 3, name="b"),
    ]
    assert len(scheduled_evaluations(named)) == 2
