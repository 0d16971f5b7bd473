"""The RL recipes: `--dry-run` for each recipe and mode through the CLI, presets, fake-backend
runs of each recipe's own env, and 2-iteration runs on the tiny model on the local engine."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from kitchen.app.cli import app
from kitchen.app.launch import run
from kitchen.app.resolve import get_recipe, resolve_config
from tests.helpers import TWO_TINY_RL_STEPS, local_engine_ready
from tests.rl_workflow.helpers import fake_backend

runner = CliRunner()
RECIPES = ["rl_basic", "rl_loop", "math_rl"]
MODES = ["sync", "streaming", "async"]


@pytest.mark.parametrize("recipe", RECIPES)
def test_dry_run_exits_zero_and_prints_the_plan(recipe):
    result = runner.invoke(app, ["run", recipe, "--backend", "fake", "--dry-run"])
    assert result.exit_code == 0, result.output
    assert "config valid" in result.output
    assert "do_rollouts" in result.output or "stream_rollouts" in result.output


@pytest.mark.parametrize("recipe", ["rl_basic", "math_rl"])
@pytest.mark.parametrize("mode", MODES)
def test_dry_run_of_each_mode(recipe, mode):
    result = runner.invoke(
        app, ["run", recipe, "--backend", "fake", "--dry-run", f"mode={mode}"], terminal_width=200
    )
    assert result.exit_code == 0, result.output
    expected = {
        "sync": "do_rollouts",
        "streaming": "stream_rollouts_and_train",
        "async": "stop_rollout_pool",
    }[mode]
    assert expected in result.output


def test_dry_run_with_kl_penalty_and_options_shows_the_reference():
    args = ["run", "math_rl", "--backend", "fake", "--dry-run", "kl_penalty_coef=0.05"]
    args += ["loss_fn=ppo", "loss_fn_config.clip_low_threshold=0.7", "num_substeps=2"]
    result = runner.invoke(app, args, terminal_width=300)
    assert result.exit_code == 0, result.output
    assert "open_reference_client" in result.output and "apply_kl_penalty" in result.output
    assert "loss_fn='ppo'" in result.output and "num_substeps=2" in result.output


def test_bad_rl_options_exit_2_naming_the_field():
    bad_mode = runner.invoke(app, ["run", "rl_basic", "--dry-run", "mode=offpolicy"])
    assert bad_mode.exit_code == 2 and "mode" in bad_mode.output
    bad_estimator = runner.invoke(
        app, ["run", "rl_basic", "--dry-run", "advantage_estimator=grpo_std"]
    )
    assert (
        bad_estimator.exit_code == 2
        and "unknown advantage estimator 'grpo_std'" in bad_estimator.output
    )
    bad_stream = runner.invoke(
        app, ["run", "rl_basic", "--dry-run", "mode=streaming", "num_substeps=2"]
    )
    assert bad_stream.exit_code == 2 and "num_substeps" in bad_stream.output


@pytest.mark.parametrize("recipe", RECIPES)
def test_cookbook_preset_holds_tinker_cookbook_values(recipe):
    rec = get_recipe(recipe)
    cfg = resolve_config(rec, preset="cookbook").config
    assert cfg.backend == "tinker" and cfg.lora_rank == 32
    expected = {
        "rl_basic": ("Qwen/Qwen3.5-9B-Base", 128, 16, 4e-5, 256, "gsm8k"),
        "rl_loop": ("Qwen/Qwen3.5-9B-Base", 128, 16, 4e-5, 256, "gsm8k"),
        "math_rl": ("Qwen/Qwen3.5-9B", 100, 4, 1e-5, 5, "arithmetic"),
    }[recipe]
    got = (
        cfg.model_name,
        cfg.groups_per_batch,
        cfg.group_size,
        cfg.optimizer.learning_rate,
        cfg.max_tokens,
        cfg.env,
    )
    assert got == expected
    rec.workflow(cfg).validate(ports={"backend", "datasets", "registry"})


def test_rl_loop_on_fake_samples_from_the_current_policy():
    fake = fake_backend()
    result = run(
        "rl_loop", {"num_batches": 2, "groups_per_batch": 2, "group_size": 2}, backend=fake
    )
    assert fake.sample_policy_versions == [0] * 4 + [1] * 4
    assert fake.loss_fns == ["importance_sampling"] * 2 and fake.unawaited == 0
    assert result.steps == 2


def test_math_rl_on_fake_reads_the_bundled_math_set():
    fake = fake_backend()
    fake.responder = lambda prompt: "so \\boxed{24}"
    overrides = {"num_batches": 2, "groups_per_batch": 2, "group_size": 2, "eval_every": 1}
    result = run("math_rl", {**overrides, "num_test_problems": 2}, backend=fake)
    steps = [m for m in result.metrics if "env/all/reward/total" in m]
    assert [m["step"] for m in steps] == [0, 1]
    assert steps[0]["env/all/format"] == 1.0  # every answer boxed
    assert any("test/env/all/correct" in m for m in result.metrics)
    assert fake.unawaited == 0


def test_guess_number_env_trains_on_fake_as_multi_turn_episodes():
    fake = fake_backend()
    fake.responder = lambda prompt: "7"
    overrides = {"env": "guess_number", "num_batches": 2, "groups_per_batch": 2, "group_size": 2}
    result = run("rl_basic", {**overrides, "guess_max_turns": 3}, backend=fake)
    steps = [m for m in result.metrics if "env/all/reward/total" in m]
    assert all(1 <= m["env/all/turns_per_episode"] <= 3 for m in steps)
    assert fake.unawaited == 0


local = pytest.mark.skipif(not local_engine_ready(), reason="local engine not available")


@local
@pytest.mark.slow
@pytest.mark.parametrize(
    ("recipe", "extra"),
    [
        ("rl_basic", {}),
        ("rl_loop", {}),
        ("math_rl", {"max_tokens": 4, "num_test_problems": 2, "eval_every": 1}),
        ("rl_basic", {"mode": "streaming", "stream_minibatch_size": 1}),
        ("rl_basic", {"mode": "async", "max_steps_off_policy": 1}),
        ("rl_basic", {"kl_penalty_coef": 0.1, "loss_fn": "ppo"}),
    ],
)
def test_two_iterations_on_the_tiny_model_locally(tmp_path, recipe, extra):
    result = run(recipe, {**TWO_TINY_RL_STEPS, **extra}, backend="local", log_dir=tmp_path)
    assert result.steps == 2
    steps = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    trained = [m for m in steps if "optim/kl_sample_train_v1" in m]
    assert len(trained) == 2
    # the engine's sampler and learner agree on the sampled tokens' logprobs (on-policy)
    if extra.get("mode", "sync") != "async":
        assert abs(trained[0]["optim/kl_sample_train_v1"]) < 1e-3
    assert (tmp_path / "rollouts" / "iter_000001.jsonl").exists()
    records = [json.loads(x) for x in (tmp_path / "checkpoints.jsonl").read_text().splitlines()]
    assert records[-1]["final"] is True
