"""tinker-cookbook's run keys, `max_steps` and `behavior_if_log_dir_exists`, as key=value and in
config files, meaning what `kitchen run --max-steps` and `--if-exists` mean."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import kitchen
from kitchen.app.cli import app
from kitchen.app.resolve import resolve_config
from kitchen.engine.errors import ConfigError
from tests.helpers import chat_files

runner = CliRunner()


def _steps(log_dir: Path) -> list[int]:
    """The training steps in metrics.jsonl (the final evaluation's row has no learning rate)."""
    rows = [json.loads(line) for line in (log_dir / "metrics.jsonl").read_text().splitlines()]
    return [row["step"] for row in rows if "learning_rate" in row]


def _earlier_run(log_dir: Path) -> None:
    log_dir.mkdir()
    (log_dir / "metrics.jsonl").write_text('{"step": 0, "loss": 9.0}\n' * 5)


def test_the_cookbooks_keys_run_two_steps_on_the_local_engine(tmp_path: Path) -> None:
    log_dir = tmp_path / "run"
    _earlier_run(log_dir)  # delete: the earlier run's rows are gone, not appended to
    args = ["run", "sl_basic", "max_steps=2", "behavior_if_log_dir_exists=delete", "--model",
            "kitchen/tiny-llama", "--log-dir", str(log_dir), "--no-progress"]  # fmt: skip
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "done: 2 steps" in result.output
    assert _steps(log_dir) == [0, 1]
    assert "max_steps" not in json.loads((log_dir / "config.json").read_text())["config"]


@pytest.mark.parametrize(
    ("suffix", "text"),
    [
        (".yaml", "max_steps: 2\nbehavior_if_log_dir_exists: delete\nbatch_size: 4\n"),
        (".toml", 'max_steps = 2\nbehavior_if_log_dir_exists = "delete"\nbatch_size = 4\n'),
        (".json", '{"max_steps": 2, "behavior_if_log_dir_exists": "delete", "batch_size": 4}'),
    ],
)
def test_a_config_file_with_the_keys(tmp_path: Path, suffix: str, text: str) -> None:
    train, _ = chat_files(tmp_path)
    config = tmp_path / f"run{suffix}"
    config.write_text(text)
    log_dir = tmp_path / "run"
    _earlier_run(log_dir)
    args = ["run", "sl_basic", "--config", str(config), "--backend", "fake", "-d", train,
            "--log-dir", str(log_dir), "--no-progress"]  # fmt: skip
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert _steps(log_dir) == [0, 1]


def test_a_flag_typed_wins_over_its_key(tmp_path: Path) -> None:
    train, _ = chat_files(tmp_path)
    log_dir = tmp_path / "run"
    base = ["run", "sl_basic", "--backend", "fake", "-d", train, "-b", "4", "--log-dir",
            str(log_dir), "--no-progress", "max_steps=3"]  # fmt: skip
    first = runner.invoke(app, [*base, "--max-steps", "1"])
    assert first.exit_code == 0, first.output
    assert _steps(log_dir) == [0]
    refused = runner.invoke(
        app, [*base, "behavior_if_log_dir_exists=delete", "--if-exists", "raise"]
    )
    assert refused.exit_code == 2 and "already exists" in refused.output
    again = runner.invoke(app, [*base, "behavior_if_log_dir_exists=delete"])
    assert again.exit_code == 0, again.output
    assert _steps(log_dir) == [0, 1, 2]  # started over, for the key's 3 steps


def test_the_python_api_takes_the_keys(tmp_path: Path) -> None:
    train, _ = chat_files(tmp_path)
    log_dir = tmp_path / "run"
    _earlier_run(log_dir)
    values = {"dataset": train, "batch_size": 4, "max_steps": 1,
              "behavior_if_log_dir_exists": "delete"}  # fmt: skip
    result = kitchen.run("sl_basic", values, backend="fake", log_dir=log_dir)
    assert result.steps == 1 and _steps(log_dir) == [0]


def test_the_keys_are_no_config_field_and_a_dry_run_says_the_limit() -> None:
    resolved = resolve_config("sl_basic", args=["max_steps=2", "behavior_if_log_dir_exists=ask"])
    assert (resolved.run.max_steps, resolved.run.if_exists) == (2, "ask")
    assert "max_steps" not in resolved.config.model_dump()
    result = runner.invoke(app, ["run", "sl_basic", "max_steps=2", "--dry-run"])
    assert result.exit_code == 0, result.output
    assert "stops after 2 steps (max_steps)" in result.output


@pytest.mark.parametrize(
    ("words", "message"),
    [
        (["max_steps=0"], "max_steps: expected a whole number of steps >= 1 (got 0)"),
        (["max_steps=two"], "max_steps: expected a whole number of steps >= 1 (got 'two')"),
        (
            ["behavior_if_log_dir_exists=keep"],
            "behavior_if_log_dir_exists: expected ask, delete, resume, raise (got 'keep')",
        ),
        (["max_step=2"], "max_step is not an option of recipe sl_basic; did you mean max_steps?"),
        (["--max-step", "2"], "did you mean --max-steps?"),
        (["behavior_if_logdir_exists=delete"], "did you mean behavior_if_log_dir_exists?"),
    ],
)
def test_bad_keys_are_one_line_naming_the_key(words: list[str], message: str) -> None:
    result = runner.invoke(app, ["run", "sl_basic", "--dry-run", *words])
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert "warmup_steps" not in result.output
    assert result.output.strip().count("\n") == 0, result.output


def test_a_bad_key_in_a_file_names_the_file(tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("max_step: 2\n")
    with pytest.raises(ConfigError, match=r"c\.yaml: 'max_step' is not a field .*max_steps\?"):
        resolve_config("sl_basic", config_file=config)
