"""Every recipe registered at test time, 2 steps of `kitchen run NAME --backend tinker` against
`kitchen serve` on the tiny model: the adapter end to end, through the real SDK and HTTP."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import Result
from typer.testing import CliRunner

from kitchen.app.resolve import get_recipe
from kitchen.engine.plugins import RECIPES

from .conftest import TINY

# Smaller than each recipe's own defaults where the recipe has the field: 2 steps stay quick.
SHRINK = {
    "batch_size": 2,
    "group_size": 2,
    "groups_per_batch": 2,
    "max_tokens": 8,
    "sample_max_tokens": 8,
    "num_samples_to_show": 1,
    "num_test_problems": 2,
    "test_size": 4,
    "max_length": 256,
    "humaneval_limit": 1,
    "humaneval_max_tokens": 8,
    "max_turns": 1,
    "teacher_model": TINY,
    "math_teacher_model": TINY,
    "chat_teacher_model": TINY,
    "teacher_max_tokens": 8,
    "max_prompts": 4,
    "math_groups_per_batch": 1,
    "chat_groups_per_batch": 1,
}


def _recipe_names() -> list[str]:
    return sorted(RECIPES.names())


def run_two_steps(recipe: str, base_url: str, log_dir: Path) -> Result:
    """`kitchen run RECIPE --backend tinker` on the tiny model, shrunk, for 2 steps."""
    from kitchen.app.cli import app

    fields = get_recipe(recipe).Config.model_fields
    overrides = [f"{k}={v}" for k, v in SHRINK.items() if k in fields]
    args = ["run", recipe, "--backend", "tinker", f"model_name={TINY}", f"base_url={base_url}"]
    args += [*overrides, "--max-steps", "2", "--log-dir", str(log_dir), "--no-progress"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    return result


@pytest.mark.slow
@pytest.mark.parametrize("recipe", _recipe_names())
def test_recipe_runs_two_steps_on_the_tinker_backend(
    recipe: str, sdk_env: str, tmp_path: Path
) -> None:
    result = run_two_steps(recipe, sdk_env, tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["config"]["backend"] == "tinker"
    # A run of sections (rlhf_pair_pref) logs each section's steps in the section's own folder.
    sections = config["config"].get("sections")
    folders = [tmp_path / s for s in sections] if sections else [tmp_path]
    if not sections:
        assert "done: 2 steps" in result.output
    for folder in folders:
        metrics = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]
        assert {m.get("step") for m in metrics} >= {0, 1}, folder
        assert max(m.get("step", 0) for m in metrics) <= 2, folder
