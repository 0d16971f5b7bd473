"""`kitchen eval` starting its own `kitchen serve`: a server that dies, or is not ready in time,
ends the command at once with a one-line error carrying the server's last log lines."""

from __future__ import annotations

import pytest
import typer

from kitchen.app.cli_eval import _server
from tests.tinker_backend.conftest import TINY


def _start_error(model: str, timeout_s: float, capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(typer.Exit) as exit_info, _server(None, model, timeout_s):
        pytest.fail("the server should not have become ready")
    assert exit_info.value.exit_code == 1
    [line] = capsys.readouterr().err.strip().splitlines()
    return line


def test_a_server_that_dies_before_ready_is_reported_with_its_log(
    capsys: pytest.CaptureFixture[str],
) -> None:
    line = _start_error("kitchen/no-such-model", 120, capsys)
    assert line.startswith("error: kitchen serve exited (")
    assert "no-such-model" in line  # the server's own reason, from its log


def test_a_server_not_ready_by_the_deadline_is_stopped_and_reported(
    capsys: pytest.CaptureFixture[str],
) -> None:
    line = _start_error(TINY, 0.5, capsys)
    assert line.startswith("error: kitchen serve was not ready within 0.5 s; its last log lines:")
