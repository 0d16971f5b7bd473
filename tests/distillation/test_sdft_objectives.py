"""SDFT's objectives and teacher sync, against tinker-cookbook 0.6.1's distillation/sdft.py on the
same inputs: topk = 0's per-token advantages (`compute_sdft_advantages`), reverse's datums
(`build_reverse_kl_datums`) and loss with its gradient (`reverse_kl_custom_loss`); then on the
fake backend the loss each objective sends and the teacher's weights with `teacher_sync_every`,
and 2-step runs on tiny-llama of reverse (the local engine's custom loss on [N, K] targets)
and topk = 0."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest
from tinker import types

from kitchen.adapters.fake import FakeBackend
from kitchen.adapters.fake.backend import FakeSamplingClient
from kitchen.app.launch import run
from kitchen.app.resolve import get_recipe, resolve_config
from tests.distillation.test_topk_parity import (
    VOCAB,
    K,
    ReplayTeacher,
    _Done,
    awkward_topk,
    rl_datum,
)
from train_core.distillation.sdft_objectives import (
    SDFT_OBJECTIVES,
    build_per_token_advantage_datums,
    reverse_kl_topk_loss,
    sdft_objective,
)
from train_core.distillation.topk import build_topk_distillation_datums

cookbook_sdft = pytest.importorskip("tinker_cookbook.distillation.sdft")
torch = pytest.importorskip("torch")


class LogprobTeacher:
    """compute_logprobs from a function of the tokens: None at position 0 and at every 6th."""

    def compute_logprobs(self, prompt: types.ModelInput) -> _Done:
        tokens = prompt.to_ints()
        rng = np.random.default_rng(len(tokens) + sum(tokens))
        lps = [None if t % 6 == 0 else float(rng.normal(-2, 1)) for t in range(len(tokens))]
        return _Done(lps)


def sampled_datums() -> tuple[list[types.Datum], list[dict[str, int]], list[types.ModelInput]]:
    """Three student datums over two teacher prompts, one cut by the teacher's context, with
    student logprobs that vary by position."""
    data_D = [
        rl_datum([1, 2, 3], [7, 8, 9, 10, 11, 12, 13]),
        rl_datum([1, 2], [20, 21, 22, 23, 24]),
        rl_datum([4, 5, 6, 7], [30, 31, 32, 33, 34, 35, 36, 37, 38]),
    ]
    rng = np.random.default_rng(0)
    for d in data_D:
        n = d.model_input.length
        d.loss_fn_inputs["logprobs"] = types.TensorData.from_numpy(
            rng.normal(-1.5, 0.5, size=n).astype(np.float32)
        )
    prompts_P = [types.ModelInput.from_ints([40, 41, 42, 43, 44]), types.ModelInput.from_ints([45, 46])]  # fmt: skip
    return data_D, [{"group_idx": 0}, {"group_idx": 1}, {"group_idx": 0}], prompts_P


def test_topk_zero_advantages_equal_the_cookbooks_compute_sdft_advantages() -> None:
    data_D, meta_D, prompts_P = sampled_datums()
    theirs = [types.Datum(model_input=d.model_input, loss_fn_inputs=dict(d.loss_fn_inputs)) for d in data_D]  # fmt: skip
    ours, metrics = asyncio.run(
        build_per_token_advantage_datums(data_D, meta_D, LogprobTeacher(), prompts_P, 12)
    )
    their_metrics = asyncio.run(
        cookbook_sdft.compute_sdft_advantages(theirs, meta_D, LogprobTeacher(), prompts_P, 12)
    )
    assert their_metrics["sdft/teacher_truncated_count"] == 1.0  # the cut case is exercised
    for a, b in zip(ours, theirs, strict=True):
        assert set(a.loss_fn_inputs) == set(b.loss_fn_inputs)
        for key in a.loss_fn_inputs:
            np.testing.assert_allclose(
                a.loss_fn_inputs[key].to_numpy(), b.loss_fn_inputs[key].to_numpy(), rtol=1e-6
            )
    assert any(np.abs(a.loss_fn_inputs["advantages"].to_numpy()).sum() > 0 for a in ours)
    assert metrics == pytest.approx({k.removeprefix("sdft/"): v for k, v in their_metrics.items()})


def test_reverse_datums_equal_the_cookbooks_build_reverse_kl_datums() -> None:
    data_D, meta_D, prompts_P = sampled_datums()
    args = (data_D, meta_D, ReplayTeacher(awkward_topk), prompts_P, K, 12, VOCAB)
    ours, _ = asyncio.run(build_topk_distillation_datums(*args))
    theirs, _ = asyncio.run(cookbook_sdft.build_reverse_kl_datums(*args))
    for a, b in zip(ours, theirs, strict=True):
        assert a.model_input.to_ints() == b.model_input.to_ints()
        for key in ("target_tokens", "weights"):
            np.testing.assert_allclose(
                a.loss_fn_inputs[key].to_numpy(), b.loss_fn_inputs[key].to_numpy(), rtol=1e-6
            )
    assert SDFT_OBJECTIVES["reverse"].build is build_topk_distillation_datums


def test_reverse_kl_loss_and_gradient_equal_the_cookbooks() -> None:
    data_D, meta_D, prompts_P = sampled_datums()
    teacher = ReplayTeacher(awkward_topk)
    soft, _ = asyncio.run(
        build_topk_distillation_datums(data_D, meta_D, teacher, prompts_P, K, 12, VOCAB)
    )
    rng = np.random.default_rng(1)
    student = [rng.normal(-2, 1, size=(d.model_input.length, K)) for d in soft]

    def run_loss(fn: Any) -> tuple[float, list[np.ndarray], dict[str, float]]:
        lps = [torch.tensor(s, dtype=torch.float32, requires_grad=True) for s in student]
        loss, metrics = fn(soft, lps)
        loss.backward()
        return float(loss.detach()), [lp.grad.numpy() for lp in lps], metrics

    ours, theirs = run_loss(reverse_kl_topk_loss), run_loss(cookbook_sdft.reverse_kl_custom_loss)
    assert ours[0] == pytest.approx(theirs[0], rel=1e-5) and ours[0] != 0.0
    for g_ours, g_theirs in zip(ours[1], theirs[1], strict=True):
        np.testing.assert_allclose(g_ours, g_theirs, rtol=1e-5, atol=1e-7)
    assert any(np.abs(g).sum() > 0 for g in ours[1])
    assert ours[2] == pytest.approx({k.removeprefix("sdft/"): v for k, v in theirs[2].items()})


def test_topk_and_reverse_pick_a_row_and_reverse_without_a_top_k_is_refused() -> None:
    assert [sdft_objective(20, False), sdft_objective(20, True), sdft_objective(0, False)] == [
        "forward", "reverse", "per_token",
    ]  # fmt: skip
    with pytest.raises(ValueError, match="topk > 0"):
        sdft_objective(0, True)
    with pytest.raises(Exception, match="reverse=True needs topk > 0"):
        resolve_config(get_recipe("sdft"), args=["topk=0", "reverse=true"])


def test_cookbook_defaults_keep_a_frozen_forward_kl_teacher() -> None:
    """The cookbook's Config defaults (topk 20, reverse False, teacher_sync_every None) are
    Kitchen's defaults, the behaviour before these options existed."""
    theirs = cookbook_sdft.Config(model_name="m", recipe_name="r", log_path="/tmp/unused")
    cfg = resolve_config(get_recipe("sdft")).config
    assert (theirs.topk, theirs.reverse) == (cfg.topk, cfg.reverse) == (20, False)
    assert theirs.teacher_sync_every is None and cfg.teacher_sync_every == 0


COMMON = {"save_every": 0, "no_register": True, "groups_per_batch": 2, "max_tokens": 16}


def teacher_versions(monkeypatch: Any) -> list[int]:
    """The weights version of every sampler asked for top-K prompt logprobs (the teacher)."""
    versions: list[int] = []
    original = FakeSamplingClient.sample

    def sample(self: Any, *args: Any, **kw: Any) -> Any:
        if kw.get("topk_prompt_logprobs"):
            versions.append(self.version)
        return original(self, *args, **kw)

    monkeypatch.setattr(FakeSamplingClient, "sample", sample)
    return versions


@pytest.mark.parametrize("every", [0, 2])
def test_teacher_takes_the_students_weights_every_n_steps(monkeypatch, every) -> None:
    versions = teacher_versions(monkeypatch)
    fake = FakeBackend()
    overrides = {**COMMON, "num_batches": 4, "num_test_demos": 2, "eval_every": 0}
    result = run("sdft", {**overrides, "teacher_sync_every": every}, backend=fake)
    assert result.steps == 4 and fake.unawaited == 0
    held_out, steps = versions[:2], versions[2:]
    assert held_out == [0, 0] and len(steps) == 4 * 2
    # 2 questions a step; the fake's version counts optim steps: after step 1 the student is at 2
    expected = [0] * 8 if every == 0 else [0, 0, 0, 0, 2, 2, 2, 2]
    assert steps == expected
    synced = [m["sdft/teacher_synced_at_step"] for m in result.metrics if "sdft/teacher_synced_at_step" in m]  # fmt: skip
    assert synced == ([] if every == 0 else [1.0, 3.0])


@pytest.mark.parametrize(
    ("objective", "loss"),
    [({}, "cross_entropy"), ({"reverse": True}, "custom"), ({"topk": 0}, "importance_sampling")],
)
def test_each_objective_sends_its_loss(objective, loss) -> None:
    fake = FakeBackend()
    overrides = {**COMMON, "num_batches": 2, "num_test_demos": 2, "eval_every": 1}
    result = run("sdft", {**overrides, **objective}, backend=fake)
    assert fake.loss_fns == [loss] * 2
    ce = [m["test/teacher_ce"] for m in result.metrics if "test/teacher_ce" in m]
    assert (
        len(ce) == 3
    )  # held out at K = 20 whatever the objective, before each step and at the end
    trained = [m for m in result.metrics if "optim/lr" in m]
    assert all(("train_teacher_ce" in m) == (loss != "importance_sampling") for m in trained)


@pytest.mark.slow
@pytest.mark.parametrize("objective", [{"topk": 4, "reverse": True}, {"topk": 0}])
def test_two_steps_of_each_other_objective_on_tiny_llama(tmp_path, objective) -> None:
    overrides = {
        "model_name": "kitchen/tiny-llama", "save_every": 0, "no_register": True, "num_batches": 2,
        "groups_per_batch": 2, "max_tokens": 8, "eval_every": 0, "num_test_demos": 0,
        "teacher_sync_every": 1, **objective,
    }  # fmt: skip
    result = run("sdft", overrides, backend="local", log_dir=tmp_path)
    assert result.steps == 2
    trained = [m for m in result.metrics if "optim/lr" in m]
    assert len(trained) == 2
    if objective["topk"]:  # the custom loss ran on [N, K] logprobs, over non-empty slots
        assert all(np.isfinite(m["train_teacher_ce"]) for m in trained)
        assert all(m["sdft/reverse_kl_positions"] > 0 for m in trained)
        assert all(np.isfinite(m["sdft/reverse_kl_mean"]) for m in trained)
    else:  # the advantages are teacher - student logprobs of the sampled tokens: not all 0
        assert all(np.isfinite(m["sdft/mean_advantage"]) for m in trained)
        assert any(m["sdft/mean_advantage"] != 0.0 for m in trained)
    synced = [m for m in result.metrics if "sdft/teacher_synced_at_step" in m]
    assert len(synced) == 2
