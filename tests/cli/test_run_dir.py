"""Run directories that do not collide by surprise (issue 38): on a terminal an existing one asks
(delete, resume or quit), as tinker-cookbook's behavior_if_exists="ask"; off a terminal the run
fails with the flag to pass; a run that fails before its first step leaves nothing behind; the
Python API's errors name its arguments; `--config` takes YAML."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

import kitchen
from kitchen.app.cli import app
from kitchen.engine.errors import ConfigError, KitchenError
from kitchen.engine.runner import BaseHook

ROOT = Path(__file__).resolve().parents[2]
FAKE = ["--backend", "fake", "-m", "kitchen/tiny-llama", "--no-progress"]
runner = CliRunner()


def steps_logged(log_dir: Path) -> list[int]:
    rows = [json.loads(x) for x in (log_dir / "metrics.jsonl").read_text().splitlines()]
    return [r["step"] for r in rows if "train_mean_nll" in r]


def on_terminal(args: list[str], answer: str, cwd: Path) -> tuple[int, str]:
    """`kitchen ARGS` with a pseudo-terminal for stdin, stdout and stderr; `answer` is typed once
    the question is asked. Returns the exit code and everything it printed."""
    master, slave = os.openpty()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "100"}
    command = [sys.executable, "-m", "kitchen.app.cli", *args]
    proc = subprocess.Popen(command, stdin=slave, stdout=slave, stderr=slave, cwd=cwd, env=env)
    os.close(slave)
    out, asked, deadline = b"", False, time.monotonic() + 120
    try:
        while time.monotonic() < deadline:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # the child closed the terminal: it has exited
                break
            if not chunk:
                break
            out += chunk
            if not asked and b"[q]uit?" in out:
                os.write(master, answer.encode() + b"\n")
                asked = True
        return proc.wait(timeout=60), out.decode(errors="replace")
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()


@pytest.mark.slow  # two kitchen processes on a pseudo-terminal
def test_on_a_terminal_an_existing_run_dir_asks_quit_or_delete(tmp_path: Path) -> None:
    kitchen.run("sl_basic", backend="fake", log_dir=tmp_path / "runs/sl_basic", max_steps=3)
    args = ["run", "sl_basic", *FAKE, "--max-steps", "2"]
    code, out = on_terminal(args, "q", tmp_path)
    assert code == 2, out
    assert "log dir runs/sl_basic already exists: [d]elete it and start over" in out
    assert "--if-exists resume" in out and "--if-exists delete" in out  # to skip the question
    assert steps_logged(tmp_path / "runs/sl_basic") == [0, 1, 2]
    code, out = on_terminal(args, "d", tmp_path)
    assert code == 0, out
    assert "done: 2 steps" in out
    assert steps_logged(tmp_path / "runs/sl_basic") == [0, 1]  # the old run's rows are gone


def test_off_a_terminal_an_existing_run_dir_fails_with_the_flag_to_pass(tmp_path: Path) -> None:
    log_dir = tmp_path / "run"
    kitchen.run("sl_basic", backend="fake", log_dir=log_dir, max_steps=2)
    result = runner.invoke(app, ["run", "sl_basic", *FAKE, "--log-dir", str(log_dir)])
    assert result.exit_code == 2
    assert result.output.startswith("error: log dir ") and result.output.count("\n") == 1
    assert "pass --if-exists resume to continue it or --if-exists delete" in result.output
    assert steps_logged(log_dir) == [0, 1]


def test_the_python_api_names_its_argument_not_the_flag(tmp_path: Path) -> None:
    kitchen.run("sl_basic", backend="fake", log_dir=tmp_path / "demo", max_steps=2)
    with pytest.raises(ConfigError) as err:
        kitchen.run("sl_basic", backend="fake", log_dir=tmp_path / "demo", max_steps=2)
    assert 'if_exists="resume"' in str(err.value) and 'if_exists="delete"' in str(err.value)
    assert "--" not in str(err.value)
    again = kitchen.run(
        "sl_basic", backend="fake", log_dir=tmp_path / "demo", max_steps=2, if_exists="delete"
    )
    assert again.steps == 2


def test_a_run_that_fails_before_its_first_step_leaves_no_directory(tmp_path: Path) -> None:
    log_dir = tmp_path / "runs" / "typo"
    args = ["run", "sl_basic", *FAKE, "--log-dir", str(log_dir), "-d", str(tmp_path / "nope.jsonl")]
    failed = runner.invoke(app, args)
    assert failed.exit_code == 2 and "nope.jsonl" in failed.output
    assert not log_dir.exists()
    # so the corrected command runs, with no --if-exists
    fixed = runner.invoke(app, ["run", "sl_basic", *FAKE, "--log-dir", str(log_dir), "--max-steps", "1"])  # fmt: skip
    assert fixed.exit_code == 0, fixed.output
    # a directory that was there (empty) before the failed run stays, and stays empty
    mine = tmp_path / "mine"
    mine.mkdir()
    with pytest.raises(KitchenError):
        kitchen.run("sl_basic", {"dataset": "nope.jsonl"}, backend="fake", log_dir=mine)
    assert mine.is_dir() and not any(mine.iterdir())


class FailAtStep(BaseHook):
    def on_step_end(self, step: int, metrics: dict) -> None:
        if step == 1:
            raise RuntimeError("stop here")


def test_a_run_that_fails_after_a_step_keeps_what_it_wrote(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError):
        kitchen.run("sl_basic", backend="fake", log_dir=tmp_path / "run", hooks=[FailAtStep()])
    assert (tmp_path / "run" / "metrics.jsonl").exists()


def test_config_takes_yaml_as_toml_and_json(tmp_path: Path) -> None:
    (tmp_path / "c.yaml").write_text("batch_size: 4\nlearning_rate: 3.0e-4\n")
    result = runner.invoke(app, ["run", "sl_basic", "--config", str(tmp_path / "c.yaml"), "--dry-run"])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "batch_size=4" in result.output and "learning_rate=0.0003" in result.output
    (tmp_path / "bad.yml").write_text("batch_size: [4\n")
    bad = runner.invoke(app, ["run", "sl_basic", "--config", str(tmp_path / "bad.yml")])
    assert bad.exit_code == 2 and bad.output.startswith("error: config file ")
    assert bad.output.count("\n") == 1
