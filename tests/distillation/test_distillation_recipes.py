"""The distillation recipes: `--dry-run` through the CLI, the cookbook presets, and 2-step runs on
the tiny models on the local engine."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from kitchen.app.cli import app
from kitchen.app.launch import run
from kitchen.app.resolve import get_recipe, resolve_config

runner = CliRunner()
RECIPES = ["prompt_distillation", "on_policy_distillation", "distill_composite"]


@pytest.mark.parametrize("recipe", RECIPES)
def test_dry_run_exits_zero_and_prints_the_plan(recipe):
    result = runner.invoke(
        app, ["run", recipe, "--backend", "fake", "--dry-run"], terminal_width=200
    )
    assert result.exit_code == 0, result.output
    assert "config valid" in result.output
    expected = "label_with_teacher" if recipe == "prompt_distillation" else "add_teacher_kl"
    assert expected in result.output


def test_dry_run_shows_the_configured_loss():
    args = ["run", "on_policy_distillation", "--dry-run", "loss_fn=ppo", "kl_discount_factor=0.5"]
    result = runner.invoke(app, args, terminal_width=300)
    assert result.exit_code == 0, result.output
    assert "loss_fn='ppo'" in result.output and "discount=0.5" in result.output


def test_cookbook_presets_hold_tinker_cookbook_values():
    opd = resolve_config(get_recipe("on_policy_distillation"), preset="cookbook").config
    assert (opd.model_name, opd.teacher_model, opd.dataset) == (
        "Qwen/Qwen3.5-9B-Base", "Qwen/Qwen3.5-9B", "deepmath",
    )  # fmt: skip
    assert (opd.groups_per_batch, opd.group_size, opd.lora_rank, opd.max_tokens) == (
        1024,
        4,
        128,
        4096,
    )
    assert (opd.optimizer.learning_rate, opd.kl.penalty_coef, opd.loss_fn) == (
        1e-4,
        1.0,
        "importance_sampling",
    )
    multi = resolve_config(get_recipe("distill_composite"), preset="cookbook").config
    assert (multi.math_teacher_model, multi.chat_teacher_model) == (
        "Qwen/Qwen3.6-27B", "Qwen/Qwen3.5-397B-A17B",
    )  # fmt: skip
    assert (multi.math_groups_per_batch, multi.chat_groups_per_batch) == (512, 512)
    pd = resolve_config(get_recipe("prompt_distillation"), preset="cookbook").config
    assert (pd.model_name, pd.batch_size, pd.num_epochs, pd.max_length) == (
        "Qwen/Qwen3.6-35B-A3B", 128, 4, 32768,
    )  # fmt: skip
    assert (pd.teacher_temperature, pd.teacher_max_tokens, pd.evaluation.every) == (0.15, 1000, 5)


def test_unknown_option_exits_2():
    result = runner.invoke(app, ["run", "distill_composite", "--dry-run", "math_teacher=x"])
    assert result.exit_code == 2


TINY = {"model_name": "kitchen/tiny-llama", "save_every": 0, "no_register": True}
ON_POLICY = {**TINY, "num_batches": 2, "group_size": 2, "max_tokens": 8}


@pytest.mark.slow
def test_on_policy_distillation_two_steps_on_the_tiny_models(tmp_path):
    overrides = {**ON_POLICY, "teacher_model": "kitchen/tiny-qwen", "groups_per_batch": 2}
    result = run("on_policy_distillation", overrides, backend="local", log_dir=tmp_path)
    assert result.steps == 2
    kls = [m["teacher_kl"] for m in result.metrics if "teacher_kl" in m]
    assert len(kls) == 2 and all(abs(k) < 50 for k in kls)
    assert (tmp_path / "rollouts" / "iter_000001.jsonl").exists()


@pytest.mark.slow
def test_distill_composite_two_steps_on_the_tiny_models(tmp_path):
    overrides = {
        **ON_POLICY, "math_teacher_model": "kitchen/tiny-qwen", "chat_teacher_model": "kitchen/tiny-llama",
        "math_groups_per_batch": 1, "chat_groups_per_batch": 1,
    }  # fmt: skip
    result = run("distill_composite", overrides, backend="local", log_dir=tmp_path)
    assert result.steps == 2
    step = next(m for m in result.metrics if "teacher_kl" in m)
    assert {"teacher_kl/dataset_0", "teacher_kl/dataset_1"} <= set(step)


@pytest.mark.slow
def test_prompt_distillation_two_steps_on_the_tiny_models(tmp_path):
    overrides = {
        **TINY, "teacher_model": "kitchen/tiny-qwen", "max_prompts": 12, "batch_size": 2,
        "num_epochs": 1, "teacher_max_tokens": 8, "test_dataset": None, "num_samples_to_show": 0,
    }  # fmt: skip
    result = run("prompt_distillation", overrides, backend="local", log_dir=tmp_path, max_steps=2)
    assert result.steps == 2
    assert (tmp_path / "teacher_data.jsonl").read_text().count("\n") >= 4
    assert all("train_mean_nll" in m for m in result.metrics if "learning_rate" in m)
