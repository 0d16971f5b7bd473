"""The renderer is resolved when the workflow is built: every recipe's cookbook preset names its
production model's renderer in the plan, and a model with no known chat format is a config error
on --dry-run (exit 2), before any weights load."""

import pytest
from typer.testing import CliRunner

from kitchen.app.cli import app
from kitchen.engine.plugins import RECIPES

runner = CliRunner()


@pytest.mark.parametrize("recipe", RECIPES.names())
def test_cookbook_preset_dry_run_names_the_renderer(recipe: str) -> None:
    if "cookbook" not in RECIPES.get(recipe).presets:
        pytest.skip(f"{recipe} has no cookbook preset")
    result = runner.invoke(app, ["run", recipe, "--preset", "cookbook", "--dry-run"])
    assert result.exit_code == 0, result.output
    assert "init_training_client(" in result.output
    assert "renderer_name=None" not in result.output
    assert "renderer_name='" in result.output


def test_qwen3_5_preset_resolves_to_the_qwen3_5_renderer() -> None:
    result = runner.invoke(app, ["run", "math_rl", "--preset", "cookbook", "--dry-run"])
    assert result.exit_code == 0, result.output
    assert "Qwen/Qwen3.5" in result.output and "renderer_name='qwen3_5'" in result.output


def test_a_model_without_a_known_format_is_a_config_error_on_dry_run() -> None:
    result = runner.invoke(app, ["run", "sl_basic", "--model-name", "acme/model-7b", "--dry-run"])
    assert result.exit_code == 2
    assert "'acme/model-7b' has no recommended renderer" in result.output
    assert "--renderer-name" in result.output
    ok = ["run", "sl_basic", "--model-name", "acme/model-7b", "--renderer-name", "hf_template"]
    assert runner.invoke(app, [*ok, "--dry-run"]).exit_code == 0
