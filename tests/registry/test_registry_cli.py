"""`kitchen models list|show|lineage` through typer's CliRunner."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kitchen.adapters.model_registry import SQLiteRegistry, open_registry
from kitchen.app import cli_models
from kitchen.app.cli_models import app
from tests.registry.drafts import make_draft

runner = CliRunner()


@pytest.fixture
def db(tmp_path: Path) -> str:
    registry = SQLiteRegistry(tmp_path / "registry.db")
    sft = registry.register(make_draft("sft"))
    registry.register(
        make_draft("dpo-tuned", parent=sft.ref, recipe="dpo", base_model="kitchen/tiny-llama")
    )
    return str(registry.path)


def test_list_shows_every_version_with_parent_and_metrics(db: str) -> None:
    result = runner.invoke(app, ["list", "--registry", db])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].split()[:4] == ["MODEL", "RECIPE", "BACKEND", "BASE"]
    assert "RUN DIR" in lines[0]
    assert lines[1].split()[:5] == ["dpo-tuned:1", "dpo", "tinker", "kitchen/tiny-llama", "sft:1"]
    assert lines[2].split()[:5] == ["sft:1", "sl_basic", "tinker", "kitchen/tiny-llama", "-"]
    assert "/runs/dpo-tuned" in lines[1] and "/runs/sft" in lines[2]  # each run's directory
    assert "accuracy=0.75" in lines[1]
    only = runner.invoke(app, ["list", "sft", "--registry", db])
    assert [line.split()[0] for line in only.output.splitlines()[1:]] == ["sft:1"]


def test_show_prints_fields_and_redacted_config(db: str) -> None:
    result = runner.invoke(app, ["show", "dpo-tuned:1", "--registry", db])
    assert result.exit_code == 0, result.output
    assert "parent:       sft:1" in result.output
    assert "state_path:   /runs/dpo-tuned/ckpt/final/state" in result.output
    assert "bundled:chat split=train fingerprint=ab12cd" in result.output
    assert '"api_key": "<redacted>"' in result.output
    assert "tml-SECRET-123" not in result.output
    as_json = json.loads(runner.invoke(app, ["show", "sft", "--json", "--registry", db]).output)
    assert as_json["version"] == 1 and as_json["recipe"] == "sl_basic"


def test_lineage_lists_model_then_parents_then_base_model(db: str) -> None:
    result = runner.invoke(app, ["lineage", "dpo-tuned", "--registry", db])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert [line.split()[0] for line in lines[1:3]] == ["dpo-tuned:1", "sft:1"]
    assert lines[-1] == "base model: kitchen/tiny-llama"


def test_registry_path_from_environment(db: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KITCHEN_REGISTRY", db)
    result = runner.invoke(app, ["lineage", "dpo-tuned:1", "--json"])
    assert [r["name"] for r in json.loads(result.output)] == ["dpo-tuned", "sft"]


def test_unknown_name_is_a_clear_usage_error(db: str) -> None:
    result = runner.invoke(app, ["show", "nope", "--registry", db])
    assert result.exit_code == 2
    assert result.output.startswith("error: no registered model named 'nope' in ")
    assert "kitchen models list" in result.output and result.output.count("\n") == 1
    assert runner.invoke(app, ["lineage", "sft:9", "--registry", db]).exit_code == 2
    bad_ref = runner.invoke(app, ["show", "sft:one", "--registry", db])
    assert bad_ref.exit_code == 2 and "not a positive integer" in bad_ref.output


def test_empty_registry_and_broken_registry(
    tmp_path: Path, db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = runner.invoke(app, ["list", "--registry", str(tmp_path / "none.db")])
    assert empty.exit_code == 0 and empty.output.startswith("no registered models in ")
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"\x00garbage" * 100)
    broken = runner.invoke(app, ["list", "--registry", str(garbage)])
    assert broken.exit_code == 1 and "is not a readable SQLite database" in broken.output
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    # Wait 0.2 s for the lock instead of the default 10 s.
    monkeypatch.setattr(cli_models, "open_registry", lambda spec: open_registry(spec, timeout=0.2))
    try:
        locked = runner.invoke(app, ["list", "--registry", db])
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert locked.exit_code == 1 and "is locked by another process" in locked.output
