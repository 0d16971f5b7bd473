"""`kitchen sandbox run FILE`, driven through the typer sub-app."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from kitchen.app.cli_sandbox import app

runner = CliRunner()


def test_run_prints_one_json_verdict(sandbox, tmp_path):
    program = tmp_path / "sum.py"
    program.write_text("import sys\nprint(sum(map(int, sys.stdin.read().split())))\n")
    stdin = tmp_path / "in.txt"
    stdin.write_text("1 2 3\n")
    result = runner.invoke(app, ["run", str(program), "--stdin", str(stdin)])
    assert result.exit_code == 0, result.output
    verdict = json.loads(result.stdout)
    assert verdict["reason"] == "ok" and verdict["exit_code"] == 0 and verdict["stdout"] == "6\n"
    assert set(verdict) >= {"stderr", "wall_s", "cpu_s", "peak_memory_mb"}


def test_run_reports_timeout_and_exits_1(sandbox, tmp_path):
    program = tmp_path / "sleep.py"
    program.write_text("import time\ntime.sleep(30)\n")
    result = runner.invoke(app, ["run", str(program), "--timeout", "0.5", "--memory", "128"])
    assert result.exit_code == 1
    assert json.loads(result.stdout)["reason"] == "timeout"


def test_missing_file_is_a_usage_error(tmp_path):
    result = runner.invoke(app, ["run", str(tmp_path / "nope.py")])
    assert result.exit_code == 2 and "nope.py" in result.output
