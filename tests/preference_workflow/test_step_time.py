"""DPO steps report their wall time, the reference's scoring, forward_backward and optim_step,
and their throughput, with what optim_step returned (fake backend)."""

from __future__ import annotations

import kitchen
from tests.helpers import assert_step_times, report_peak_memory, step_records


def test_each_dpo_step_records_its_time_phases_and_throughput(tmp_path, monkeypatch):
    report_peak_memory(monkeypatch, gib=0.75)
    kitchen.run("dpo", {"no_register": True}, backend="fake", log_dir=tmp_path, max_steps=3)
    records = step_records(tmp_path)
    assert [r["step"] for r in records] == [0, 1, 2]
    assert_step_times(records, ("reference", "forward_backward", "optim_step"))
    assert [r["memory/peak_gib"] for r in records] == [0.75] * 3
