"""Step time through the tinker adapter (the real SDK against `kitchen serve`): each step's
record has its wall time, its phases and its throughput, as on the embedded backends."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kitchen.app.launch import get_recipe
from tests.helpers import assert_step_times

from .conftest import TINY
from .test_recipes import SHRINK


@pytest.mark.slow
@pytest.mark.parametrize(
    ("recipe", "phases"),
    [
        ("sl_basic", ("forward_backward", "optim_step")),
        ("dpo", ("reference", "forward_backward", "optim_step")),
        ("rl_basic", ("sampling", "forward_backward", "optim_step")),
    ],
)
def test_steps_record_time_phases_and_throughput_on_the_tinker_backend(
    recipe: str, phases: tuple[str, ...], sdk_env: str, tmp_path: Path
) -> None:
    from kitchen.app.cli import app

    fields = get_recipe(recipe).Config.model_fields
    overrides = [f"{k}={v}" for k, v in SHRINK.items() if k in fields]
    args = ["run", recipe, "--backend", "tinker", f"model_name={TINY}", f"base_url={sdk_env}"]
    args += [*overrides, "--max-steps", "2", "--log-dir", str(tmp_path), "--no-progress"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    lines = (tmp_path / "metrics.jsonl").read_text().splitlines()
    records = [r for r in map(json.loads, lines) if "num_tokens" in r]
    assert [r["step"] for r in records] == [0, 1]
    assert_step_times(records, phases)
