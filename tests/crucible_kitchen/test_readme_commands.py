"""crucible_kitchen's README commands (`mix kitchen.run :X ...` -> `kitchen run X ...`) and Python
calls work as written: each --dry-run binds the values crucible_kitchen means, and the Python dict with the
seed's keys builds the same config as the flags."""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from kitchen.app.cli import app
from kitchen.app.resolve import get_recipe, resolve_config

runner = CliRunner()


def dry_run(*args: str) -> str:
    result = runner.invoke(app, ["run", *args, "--dry-run"])
    assert result.exit_code == 0, result.output
    return result.output


def test_supervised_binds_model_dataset_epochs_batch_and_lr() -> None:
    out = dry_run("supervised", "--model", "meta-llama/Llama-3.1-8B", "--dataset",
                  "HuggingFaceH4/no_robots", "--epochs", "2", "--batch-size", "64",
                  "--learning-rate", "2.0e-4")  # fmt: skip
    # a base Llama takes role_colon (tinker-cookbook's rule), resolved by the dry run
    assert "init_training_client(base_model='meta-llama/Llama-3.1-8B'" in out
    assert "renderer_name='role_colon'" in out
    assert (
        "load_dataset(source='HuggingFaceH4/no_robots', into='conversations', split='train'" in out
    )
    # the held-out set follows the training set: no_robots' own test split
    assert "source='HuggingFaceH4/no_robots', into='test_conversations', split='test'" in out
    assert (
        "loop epoch over range(2)" in out
        and "batch_size=64" in out
        and "learning_rate=0.0002" in out
    )
    assert "LoRA rank 32: 88,121,344 trainable parameters" in out


def test_dpo_binds_the_hhh_symbol_and_beta() -> None:
    out = dry_run("dpo", "--model", "meta-llama/Llama-3.2-1B", "--dataset", "hhh",
                  "--dpo-beta", "0.1", "--epochs", "1")  # fmt: skip
    assert "base_model='meta-llama/Llama-3.2-1B'" in out
    assert "source='Anthropic/hh-rlhf', into='comparisons', split='train'" in out
    assert "source='Anthropic/hh-rlhf', into='test_comparisons', split='test'" in out
    assert "DPOLoss(beta=0.1)" in out and "loop epoch over range(1)" in out


def test_code_rl_num_rollouts_is_iterations_and_group_size_stays() -> None:
    args = ["--model", "meta-llama/Llama-3.1-8B-Instruct", "--env", "deepcoder",
            "--group-size", "4", "--num-rollouts", "100"]  # fmt: skip
    rec = get_recipe("code_rl")
    cfg = resolve_config(rec, args=args).config
    assert (cfg.model_name, cfg.env, cfg.group_size, cfg.num_batches) == (
        "meta-llama/Llama-3.1-8B-Instruct", "deepcoder", 4, 100,
    )  # fmt: skip
    # crucible_kitchen's CodeRL algorithm defaults
    assert (cfg.clip_epsilon, cfg.ppo_epochs, cfg.gamma, cfg.gae_lambda) == (0.2, 4, 0.99, 0.95)
    out = dry_run("code_rl", *args)
    assert "base_model='meta-llama/Llama-3.1-8B-Instruct'" in out
    assert "env='deepcoder'" in out and "num_batches=100" in out and "ppo_epochs=4" in out
    assert "estimator='gae', gamma=0.99, lam=0.95" in out


def test_key_value_form_with_n_train_samples() -> None:
    out = dry_run("sl_basic", "model_name=meta-llama/Llama-3.1-8B", "n_train_samples=100",
                  "batch_size=32")  # fmt: skip
    assert "base_model='meta-llama/Llama-3.1-8B'" in out
    assert re.search(r"into='conversations'.*limit=100", out)
    assert "batch_size=32" in out


def test_seed_python_call_builds_the_same_config_as_the_flags() -> None:
    rec = get_recipe("dpo")
    seed = {"model": "meta-llama/Llama-3.2-1B", "dataset": "hhh", "dpo_beta": 0.1, "epochs": 1,
            "batch_size": 256, "learning_rate": 1e-5}  # fmt: skip
    flags = ["-m", "meta-llama/Llama-3.2-1B", "-d", "hhh", "--dpo-beta", "0.1", "-e", "1",
             "-b", "256", "-l", "1e-5"]  # fmt: skip
    from_python = resolve_config(rec, values=seed).config
    assert from_python == resolve_config(rec, args=flags).config
    assert (from_python.model_name, from_python.num_epochs) == ("meta-llama/Llama-3.2-1B", 1)
    ref = resolve_config(rec, values={"reference_model": "meta-llama/Llama-3.2-1B"}).config
    assert ref.reference_model_name == "meta-llama/Llama-3.2-1B"


@pytest.mark.parametrize(
    ("recipe", "values"),
    [
        ("supervised", {"model_name": "meta-llama/Llama-3.1-8B", "batch_size": 128,
                        "max_length": 32768, "learning_rate": 2e-4}),
        ("dpo", {"model_name": "meta-llama/Llama-3.2-1B", "dataset": "Anthropic/hh-rlhf", "batch_size": 256,
                 "learning_rate": 1e-5}),
        ("code_rl", {"model_name": "meta-llama/Llama-3.1-8B-Instruct", "groups_per_batch": 100,
                     "num_batches": 100, "max_tokens": 512, "ppo_epochs": 4}),
    ],
)  # fmt: skip
def test_seed_preset_holds_the_seed_defaults_for_tinker(recipe: str, values: dict) -> None:
    cfg = resolve_config(get_recipe(recipe), preset="seed").config
    assert cfg.backend == "tinker"
    flat = cfg.model_dump()
    for key, value in values.items():
        got = flat.get(key, flat.get("optimizer", {}).get(key))
        assert got == value, (recipe, key)
    dry_run(recipe, "--preset", "seed")


def test_warmup_schedules_are_the_decay_after_warmup() -> None:
    cfg = resolve_config(get_recipe("sl_basic"), values={"lr_schedule": "warmup_cosine"}).config
    assert (cfg.optimizer.schedule, cfg.optimizer.warmup_steps) == ("cosine", 10)
    cfg = resolve_config(
        get_recipe("sl_basic"), values={"lr_schedule": "warmup_linear", "warmup_steps": 3}
    ).config
    assert (cfg.optimizer.schedule, cfg.optimizer.warmup_steps) == ("linear", 3)


def test_a_test_dataset_flag_overrides_the_held_out_set() -> None:
    out = dry_run("sl_basic", "-d", "no_robots", "--test-dataset", "bundled:chat")
    assert "source='bundled:chat', into='test_conversations', split='test'" in out
    out = dry_run("sl_basic", "-d", "tulu3")  # no test split: its first 1024 rows, not trained on
    assert "into='conversations', split='train[1024:]'" in out
    assert "into='test_conversations', split='train[:1024]'" in out


def test_unknown_renderer_fails_the_dry_run_in_one_line() -> None:
    result = runner.invoke(app, ["run", "supervised", "-m", "my-model", "--dry-run"])
    assert result.exit_code == 2
    assert result.output.count("\n") == 1 and "no recommended renderer" in result.output


@pytest.mark.parametrize(
    "args",
    [["run"], ["run", "nope"], ["show"], ["bogus"], ["run", "sl_basic", "--modle", "x"],
     ["run", "sl_basic", "--epochs"], ["run", "sl_basic", "--if-exists", "x"]],
)  # fmt: skip
def test_every_usage_error_is_one_line_and_exit_2(args: list[str]) -> None:
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert result.output.startswith("error: ") and result.output.count("\n") == 1, result.output


@pytest.mark.parametrize("args", [["run", "dpo", "--help"], ["help", "dpo"]])
def test_recipe_help_lists_its_flags_with_types_defaults_and_help(args: list[str]) -> None:
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    at = next(i for i, x in enumerate(lines) if x.strip().startswith("--dpo-beta"))
    assert "float" in lines[at] and "0.1" in lines[at] and "DPO temperature" in lines[at + 1]
    assert (
        "--model-name, -m, --model" in result.output
        and "--num-epochs, -e, --epochs" in result.output
    )
