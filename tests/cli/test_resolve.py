"""resolve_config is the one config resolution: today's spellings reach their fields through it,
the layers keep their precedence, bad input is one line with exit 2, and the backend, the run
directory and the ports are decided there once."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from kitchen.app.cli import app
from kitchen.app.resolve import resolve_config
from kitchen.engine.errors import ConfigError

from .spellings import FILES, FLAGS, PYTHON

runner = CliRunner()


def at(cfg: Any, path: str) -> Any:
    for part in path.split("."):
        cfg = getattr(cfg, part)
    return cfg


def assert_sets(cfg: Any, expected: dict[str, Any]) -> None:
    for path, value in expected.items():
        got = at(cfg, path)
        assert (got, type(got)) == (value, type(value)), path


@pytest.mark.parametrize(
    ("recipe", "words", "expected"), FLAGS, ids=[" ".join(w) for _, w, _ in FLAGS]
)
def test_every_spelling_of_today_sets_its_field(
    recipe: str, words: list[str], expected: dict[str, Any]
) -> None:
    assert_sets(resolve_config(recipe, args=words).config, expected)


@pytest.mark.parametrize(
    ("recipe", "values", "expected"), PYTHON, ids=[str(v) for _, v, _ in PYTHON]
)
def test_python_values_in_every_spelling(
    recipe: str, values: dict[str, Any], expected: dict[str, Any]
) -> None:
    assert_sets(resolve_config(recipe, values=values).config, expected)


@pytest.mark.parametrize(("recipe", "text", "expected"), FILES)
def test_config_file_spellings(
    tmp_path: Path, recipe: str, text: str, expected: dict[str, Any]
) -> None:
    (tmp_path / "c.toml").write_text(text)
    assert_sets(resolve_config(recipe, config_file=tmp_path / "c.toml").config, expected)


def test_precedence_defaults_preset_file_flags(tmp_path: Path) -> None:
    """Each layer overrides the one below it, also when they spell the field differently."""
    dpo = resolve_config("dpo").config
    assert (dpo.batch_size, dpo.optimizer.learning_rate) == (8, 3e-4)
    preset = resolve_config("dpo", preset="cookbook").config
    assert (preset.batch_size, preset.optimizer.learning_rate) == (256, 1e-5)
    assert preset.model_name != dpo.model_name
    (tmp_path / "c.toml").write_text("batch_size = 16\n[optimizer]\nlearning_rate = 2e-5\n")
    file = resolve_config("dpo", preset="cookbook", config_file=tmp_path / "c.toml").config
    assert (file.batch_size, file.optimizer.learning_rate) == (16, 2e-5)
    assert file.model_name == preset.model_name  # the preset still holds where the file is silent
    flags = resolve_config("dpo", preset="cookbook", config_file=tmp_path / "c.toml",
                           args=["-b", "4", "optimizer.learning_rate=3e-5"]).config  # fmt: skip
    assert (flags.batch_size, flags.optimizer.learning_rate) == (4, 3e-5)
    assert flags.model_name == preset.model_name


def test_a_section_given_in_part_keeps_the_recipes_other_defaults() -> None:
    cfg = resolve_config("sl_basic", values={"optimizer": {"beta2": 0.9}}).config
    assert (cfg.optimizer.beta2, cfg.optimizer.learning_rate, cfg.evaluation.every) == (
        0.9,
        2e-4,
        8,
    )


def test_a_section_field_is_not_spelled_by_its_flat_name_under_the_section() -> None:
    """`evaluation.every` or `eval_every`: the flat name under its section is not a third name."""
    with pytest.raises(
        ConfigError, match=r"evaluation\.eval_every: Extra inputs are not permitted"
    ):
        resolve_config("sl_basic", values={"evaluation": {"eval_every": 2}})
    with pytest.raises(ConfigError, match=r"evaluation\.eval_every is not an option"):
        resolve_config("sl_basic", args=["evaluation.eval_every=2"])


@pytest.mark.parametrize(
    ("words", "message"),
    [
        (["--batch-size", "0"], "--batch-size: Input should be greater than 0 (got 0)"),
        (["--adam-beta1", "2"], "--adam-beta1: Input should be less than 1 (got 2)"),
        (["--learning-rat", "1"], "did you mean --learning-rate?"),
        (["optimizer.betaa=1"], "optimizer.betaa is not an option of recipe sl_basic; did you mean beta2?"),
        (["no_register=maybe"], "no_register: expected true or false (got 'maybe')"),
        (["--preset", "nope"], "recipe sl_basic has no preset 'nope'; presets: cookbook"),
        (["--backend", "nope"], "unknown backend 'nope'"),
        (["--config", "missing.toml"], "config file missing.toml does not exist"),
        (["--batch-size"], "--batch-size needs a value"),
        (["stray"], "unexpected argument 'stray'"),
    ],
)  # fmt: skip
def test_bad_input_is_one_line_and_exit_2(words: list[str], message: str) -> None:
    result = runner.invoke(app, ["run", "sl_basic", "--dry-run", *words])
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert result.output.strip().count("\n") == 0, result.output


def test_backend_and_log_dir_are_decided_once() -> None:
    assert resolve_config("sl_basic").log_dir is None  # the Python API writes no run directory
    assert resolve_config("sl_basic", default_log_dir=True).log_dir == Path("runs/sl_basic")
    from_config = resolve_config("sl_basic", args=["--log-path", "runs/a", "--backend", "fake"])
    assert (from_config.log_dir, from_config.backend) == (Path("runs/a"), "fake")
    given = resolve_config("sl_basic", args=["log_dir=runs/a", "--backend", "fake"],
                           backend="local", log_dir="runs/b", default_log_dir=True)  # fmt: skip
    assert (given.log_dir, given.backend, given.config.backend) == (
        Path("runs/b"),
        "local",
        "local",
    )


def test_ports_come_from_the_graph(tmp_path: Path) -> None:
    """A run opens the registry exactly when a stage registers the model, sections included."""
    assert resolve_config("sl_basic").ports == {"registry"}
    assert resolve_config("sl_basic", args=["--no-register"]).ports == frozenset()
    assert resolve_config("rlhf_pair_pref").ports == {"registry"}  # its rl section registers
    assert resolve_config("rlhf_pair_pref", args=["--no-register"]).ports == frozenset()


def test_kitchen_run_records_what_resolved(tmp_path: Path) -> None:
    """The run directory, backend and config.json of `kitchen run` are the resolved ones."""
    log_dir = tmp_path / "run"
    args = ["run", "sl_loop", "--backend", "fake", "--log-dir", str(log_dir), "--no-progress",
            "--max-steps", "1", "--no-register", "eval_every=0", "-b", "8"]  # fmt: skip
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    config = json.loads((log_dir / "config.json").read_text())["config"]
    assert (config["backend"], config["register_model"], config["batch_size"]) == ("fake", False, 8)
    assert f"run directory {log_dir}" in result.output.replace("\n", "")


def test_nest_runs_once_per_config(monkeypatch: pytest.MonkeyPatch) -> None:
    """The layers (preset, file, flags) are nested in one pass, not once per layer and again."""
    import kitchen.workflows.common.config as config

    calls: list[int] = []
    nest = config.nest
    monkeypatch.setattr(config, "nest", lambda *a: calls.append(len(a)) or nest(*a))
    resolved = resolve_config("dpo", preset="cookbook", args=["--dpo-beta", "0.2", "-l", "2e-5"])
    assert (resolved.config.dpo_beta, resolved.config.optimizer.learning_rate) == (0.2, 2e-5)
    assert calls == [4]  # the model, the recipe's defaults, the preset, the flags
