"""The decisions recipe: its datums and soft-label loss equal tinker-cookbook's on the same
rendering, its plan and preset, and 2 steps on tiny-llama with hard and with soft labels."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from cookbook.datasets.decisions import (
    Decision,
    Rendering,
    brier,
    choice_probability_loss,
    decision_row,
    hard_label_datum,
    soft_label_datum,
)
from kitchen.app.cli import app
from kitchen.app.launch import run
from kitchen.app.resolve import get_recipe, resolve_config
from kitchen.engine.errors import DataError

RENDERING = Rendering(tokens=[9, 4, 12, 30, 31, 77], choice_pos=5, label_tokens={"a": 41, "b": 42})
DECISION = Decision("q?", (("a", ""), ("b", "")), "b", {"a": 0.3, "b": 0.7})


class _Renders:
    """A cookbook DecisionRenderer stand-in that returns RENDERING as the cookbook's type."""

    def render(self, decision: Any) -> Any:
        from tinker_cookbook.recipes.decisions import DecisionRendering

        return DecisionRendering(RENDERING.tokens, RENDERING.choice_pos, RENDERING.label_tokens)


def _cookbook_decision() -> Any:
    from tinker_cookbook.recipes.decisions import Decision as CookbookDecision

    return CookbookDecision(DECISION.question, DECISION.choices)


def _arrays(datum: Any) -> tuple[list[int], dict[str, np.ndarray]]:
    inputs = {k: np.asarray(v.to_numpy()) for k, v in datum.loss_fn_inputs.items()}
    return datum.model_input.to_ints(), inputs


def test_hard_and_soft_label_datums_are_the_cookbooks() -> None:
    train = pytest.importorskip("tinker_cookbook.recipes.decisions.train")
    ours = _arrays(hard_label_datum(RENDERING, "b"))
    theirs = _arrays(train.decision_choice_datums(_Renders(), [(_cookbook_decision(), "b")])[0])
    assert ours[0] == theirs[0]
    for name in ("target_tokens", "weights"):
        np.testing.assert_array_equal(ours[1][name], theirs[1][name])
    ours = _arrays(soft_label_datum(RENDERING, DECISION.probs or {}))
    theirs = _arrays(
        train.decision_dist_datums(_Renders(), [(_cookbook_decision(), DECISION.probs)])[0]
    )
    assert ours[0] == theirs[0]
    for name in ("target_tokens", "weights"):
        np.testing.assert_allclose(ours[1][name], theirs[1][name])


def test_the_soft_label_loss_and_its_gradient_are_the_cookbooks() -> None:
    train = pytest.importorskip("tinker_cookbook.recipes.decisions.train")
    datums = [soft_label_datum(RENDERING, {"a": p, "b": 1 - p}) for p in (0.1, 0.5, 0.9)]
    g = torch.Generator().manual_seed(0)
    base = [torch.randn((5, 2), generator=g) - 3 for _ in datums]
    results = []
    for loss_fn in (choice_probability_loss(brier), train.probability_loss(brier)):
        logprobs = [b.clone().requires_grad_() for b in base]
        loss, metrics = loss_fn(datums, logprobs)
        loss.backward()
        results.append((float(loss.detach()), metrics, [lp.grad for lp in logprobs]))
    (ours, our_metrics, our_grads), (theirs, their_metrics, their_grads) = results
    assert ours == pytest.approx(theirs, abs=1e-7) and ours > 0
    assert our_metrics == pytest.approx(their_metrics)
    for a, b in zip(our_grads, their_grads, strict=True):
        torch.testing.assert_close(a, b)


def test_padded_choices_leave_the_soft_label_loss_unchanged() -> None:
    probs = DECISION.probs or {}
    plain, padded = soft_label_datum(RENDERING, probs), soft_label_datum(RENDERING, probs, 4)
    assert padded.loss_fn_inputs["target_tokens"].shape[1] == 4
    logprobs = torch.tensor([[-1.0, -2.0], [-0.5, -2.5]])
    wide = torch.cat([logprobs, torch.full((2, 2), -0.1)], dim=1)  # the padding's logprobs
    loss_fn = choice_probability_loss(brier)
    (a, ma), (b, mb) = loss_fn([plain], [logprobs]), loss_fn([padded], [wide])
    assert float(a) == pytest.approx(float(b)) and ma == pytest.approx(mb)


def test_a_bad_row_is_refused_naming_it() -> None:
    row = {"question": "q", "choices": [["a", ""], ["b", ""]], "answer": "c"}
    with pytest.raises(DataError, match="row 3: answer 'c' is not one of"):
        decision_row(row, "row 3")
    row = {**row, "answer": "a", "probs": {"a": 0.2, "b": 0.2}}
    with pytest.raises(DataError, match=r"probs sum to 0\.4"):
        decision_row(row, "row 3")


@pytest.mark.parametrize(
    ("labels", "loss"), [("hard", "CrossEntropyLoss()"), ("soft", "ChoiceProbabilityLoss")]
)
def test_dry_run_plans_decision_datums_and_the_labels_loss(labels: str, loss: str) -> None:
    result = CliRunner().invoke(
        app, ["run", "decisions", "--dry-run", f"labels={labels}"], terminal_width=300
    )
    assert result.exit_code == 0, result.output
    plan = result.output
    assert f"tokenize_decisions(labels='{labels}'" in plan and loss in plan
    assert plan.index("tokenize_decisions") < plan.index("evaluate_decisions")


def test_cookbook_preset_is_the_cookbooks_forecasting_run() -> None:
    forecasting = pytest.importorskip("tinker_cookbook.recipes.decisions.forecasting")
    theirs = forecasting.Config()
    cfg = resolve_config(get_recipe("decisions"), preset="cookbook").config
    assert (cfg.model_name, cfg.lora_rank, cfg.seed) == (
        theirs.model_name,
        theirs.lora_rank,
        theirs.seed,
    )
    assert cfg.renderer_name == forecasting.default_renderer_name(theirs.model_name)
    assert (cfg.optimizer.learning_rate, cfg.evaluation.every) == (
        theirs.learning_rate,
        theirs.eval_every,
    )
    assert (cfg.labels, cfg.soft_loss, cfg.batch_size, cfg.num_epochs) == ("soft", "brier", 28, 1)


@pytest.mark.parametrize("labels", ["hard", "soft"])
def test_two_steps_on_tiny_llama(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, labels: str
) -> None:
    from kitchen.adapters.local.clients.sampling_client import LocalSamplingClient
    from kitchen.adapters.local.clients.training_client import LocalTrainingClient

    asked: list[Any] = []
    trained: list[str] = []
    sample = LocalSamplingClient.sample
    fb, custom = LocalTrainingClient.forward_backward, LocalTrainingClient.forward_backward_custom

    def recording_sample(self: Any, *args: Any, **kwargs: Any) -> Any:
        asked.append(kwargs.get("target_prompt_logprobs"))
        return sample(self, *args, **kwargs)

    def recording_fb(self: Any, data: Any, loss_fn: Any, *args: Any, **kwargs: Any) -> Any:
        trained.append(loss_fn)
        return fb(self, data, loss_fn, *args, **kwargs)

    def recording_custom(self: Any, data: Any, loss_fn: Any) -> Any:
        trained.append("custom")
        # 2- and 3-choice decisions share one target width: the engine takes one shape a batch.
        assert {tuple(d.loss_fn_inputs["target_tokens"].shape)[1] for d in data} == {3}
        return custom(self, data, loss_fn)

    monkeypatch.setattr(LocalSamplingClient, "sample", recording_sample)
    monkeypatch.setattr(LocalTrainingClient, "forward_backward", recording_fb)
    monkeypatch.setattr(LocalTrainingClient, "forward_backward_custom", recording_custom)
    overrides = {
        "model_name": "kitchen/tiny-llama", "save_every": 0, "no_register": True,
        "n_train_samples": 4, "batch_size": 2, "eval_every": 1, "n_eval": 4, "labels": labels,
    }  # fmt: skip
    result = run("decisions", overrides, backend="local", log_dir=tmp_path)
    assert result.steps == 2
    assert trained == (["cross_entropy"] * 2 if labels == "hard" else ["custom"] * 2)
    # Every held-out decision is one request asking for its choices' logprobs (3 evaluations).
    assert len(asked) == 3 * 4 and all(a is not None for a in asked)
    evals = [m for m in result.metrics if "test/accuracy" in m]
    assert len(evals) == 3
    for m in evals:
        assert 0 <= m["test/accuracy"] <= 1 and 0 < m["test/answer_prob"] < 1
        assert math.isfinite(m["test/brier"]) and m["test/num_examples"] == 4


@pytest.mark.parametrize("labels", ["hard", "soft"])
def test_two_steps_on_the_fake_backend(tmp_path: Path, labels: str) -> None:
    """`kitchen run decisions --backend fake`: the fake answers target_prompt_logprobs, so the
    evaluation at step 0 runs; its rule gives every choice but the prompt's next token one
    logprob, so each choice's softmaxed probability is at most 1."""
    from kitchen.adapters.fake import FakeBackend

    fake = FakeBackend()
    overrides = {"save_every": 0, "no_register": True, "eval_every": 1, "labels": labels}
    result = run("decisions", overrides, backend=fake, log_dir=tmp_path, max_steps=2)
    assert result.steps == 2 and fake.unawaited == 0
    assert fake.loss_fns == (["cross_entropy"] * 2 if labels == "hard" else ["custom"] * 2)
    evals = [m for m in result.metrics if "test/accuracy" in m]
    assert len(evals) == 3
    for m in evals:
        assert 0 <= m["test/accuracy"] <= 1 and 0 < m["test/answer_prob"] < 1
        assert math.isfinite(m["test/brier"])


def test_decisions_runs_two_steps_from_the_cli_on_the_fake(tmp_path: Path) -> None:
    args = ["run", "decisions", "--backend", "fake", "--max-steps", "2", "--log-dir", str(tmp_path)]
    result = CliRunner().invoke(app, args, terminal_width=300)
    assert result.exit_code == 0, result.output
    assert "done: 2 steps" in result.output
