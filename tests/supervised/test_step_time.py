"""Supervised steps report their wall time, phases and throughput on the fake backend, pipelined
(sl_basic) or not (sl_loop), with what optim_step returned; the progress bar shows tokens/s."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

import kitchen
from kitchen.app.progress import ProgressHook
from tests.helpers import assert_step_times, report_peak_memory, step_records


@pytest.mark.parametrize("recipe", ["sl_basic", "sl_loop"])
def test_each_step_records_its_time_phases_and_throughput(tmp_path, monkeypatch, recipe):
    report_peak_memory(monkeypatch, gib=1.25)
    kitchen.run(recipe, {"no_register": True}, backend="fake", log_dir=tmp_path, max_steps=3)
    records = step_records(tmp_path)
    assert [r["step"] for r in records] == [0, 1, 2]  # one record a step, pipelined or not
    assert_step_times(records, ("forward_backward", "optim_step"))
    assert [r["memory/peak_gib"] for r in records] == [1.25] * 3


def test_the_progress_bar_shows_the_steps_tokens_per_second():
    out = io.StringIO()
    hook = ProgressHook(Console(file=out, width=200, force_terminal=True))
    kitchen.run("sl_basic", {"no_register": True}, backend="fake", max_steps=3, hooks=[hook])
    shown = hook.progress.tasks[0].fields["metric"]
    assert "train_mean_nll=" in shown and shown.endswith(" tokens/s")
    assert "tokens/s" in out.getvalue()
