"""Every recipe registered at test time, 2 steps of `kitchen run NAME --backend tinker` against
`kitchen serve` on the tiny model: the adapter end to end, through the real SDK and HTTP."""

from __future__ import annotations

import json

import pytest

from kitchen.engine.plugins import RECIPES

from .conftest import TwoSteps


def _recipe_names() -> list[str]:
    return sorted(RECIPES.names())


@pytest.mark.slow
@pytest.mark.parametrize("recipe", _recipe_names())
def test_recipe_runs_two_steps_on_the_tinker_backend(recipe: str, two_steps: TwoSteps) -> None:
    result, log_dir = two_steps(recipe)
    config = json.loads((log_dir / "config.json").read_text())
    assert config["config"]["backend"] == "tinker"
    # A run of sections (rlhf_pair_pref) logs each section's steps in the section's own folder.
    sections = config["config"].get("sections")
    folders = [log_dir / s for s in sections] if sections else [log_dir]
    if not sections:
        assert "done: 2 steps" in result.output
    for folder in folders:
        metrics = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]
        assert {m.get("step") for m in metrics} >= {0, 1}, folder
        assert max(m.get("step", 0) for m in metrics) <= 2, folder
