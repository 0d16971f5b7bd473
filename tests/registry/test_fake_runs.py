"""The registry stays honest (issue 38): a run on the fake backend (a test oracle) is not
registered unless asked; `kitchen models list` shows each model's backend and run directory."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

import kitchen
from kitchen.adapters.model_registry import open_registry
from kitchen.app.cli import app

runner = CliRunner()


def test_a_fake_backend_run_is_not_registered_unless_asked(tmp_path: Path) -> None:
    registry = tmp_path / "registry.db"
    quiet = kitchen.run("sl_basic", {"registry": str(registry)}, backend="fake", max_steps=1)
    assert quiet.state.registered_model is None and not registry.exists()
    asked = kitchen.run("sl_basic", {"registry": str(registry), "register_model": True},
                        backend="fake", log_dir=tmp_path / "runs/sl", max_steps=1)  # fmt: skip
    assert asked.state.registered_model["version"] == 1
    record = open_registry(str(registry)).get("sl_basic")
    assert record.log_dir == str((tmp_path / "runs/sl").resolve())  # any clone's runs tell apart
    listed = runner.invoke(app, ["models", "list", "--registry", str(registry)])
    assert listed.exit_code == 0, listed.output
    header, row = listed.output.splitlines()
    assert header.split()[:3] == ["MODEL", "RECIPE", "BACKEND"] and "RUN DIR" in header
    assert row.split()[:3] == ["sl_basic:1", "sl_basic", "fake"]
    assert str((tmp_path / "runs/sl").resolve()) in row


def test_the_cli_registers_a_fake_run_when_asked(tmp_path: Path) -> None:
    registry = tmp_path / "registry.db"
    args = ["run", "sl_basic", "--backend", "fake", "--max-steps", "1", "--no-progress",
            "--registry", str(registry), "--log-dir", str(tmp_path / "run")]  # fmt: skip
    assert runner.invoke(app, args).exit_code == 0 and not registry.exists()
    again = runner.invoke(app, [*args, "--register-model", "--if-exists", "delete"])
    assert again.exit_code == 0, again.output
    assert [str(m.ref) for m in open_registry(str(registry)).list()] == ["sl_basic:1"]
