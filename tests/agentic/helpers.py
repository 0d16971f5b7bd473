"""What the agentic recipes' tests share: the CLI runner and a 2-step tiny-llama run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from kitchen.app.cli import app
from kitchen.app.launch import run

runner = CliRunner()
TINY = {"model_name": "kitchen/tiny-llama", "num_batches": 2, "groups_per_batch": 2,
        "group_size": 2, "save_every": 0, "no_register": True}  # fmt: skip


def dry_run(recipe: str, *args: str) -> str:
    result = runner.invoke(app, ["run", recipe, "--backend", "fake", "--dry-run", *args],
                           terminal_width=250)  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "config valid" in result.output
    return result.output


def two_steps(recipe: str, tmp_path: Path, **options: Any) -> list[dict[str, Any]]:
    """The training records of a 2-step tiny-llama run on the local engine."""
    result = run(recipe, {**TINY, **options}, backend="local", log_dir=tmp_path)
    assert result.steps == 2
    records = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in records if "env/all/reward/total" in r]
    assert [r["step"] for r in train] == [0, 1]
    return train
