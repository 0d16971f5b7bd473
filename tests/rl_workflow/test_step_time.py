"""RL steps report their wall time, phases and throughput in every mode (fake backend):
sampling, the KL reference's scoring, forward_backward and optim_step, with what optim_step
returned."""

from __future__ import annotations

import pytest

import kitchen
from tests.helpers import assert_step_times, report_peak_memory, step_records
from tests.rl_workflow.helpers import fake_backend

COMMON = {"no_register": True, "save_every": 0, "eval_every": 0, "num_batches": 3}


@pytest.mark.parametrize(
    ("overrides", "phases"),
    [
        ({}, ("sampling", "forward_backward", "optim_step")),
        ({"kl_penalty_coef": 0.5}, ("sampling", "reference", "forward_backward", "optim_step")),
        (
            {"mode": "streaming", "stream_minibatch_size": 2, "kl_penalty_coef": 0.5},
            ("sampling", "reference", "forward_backward", "optim_step"),
        ),
        ({"mode": "async"}, ("sampling", "forward_backward", "optim_step")),
    ],
    ids=["sync", "sync_kl", "streaming_kl", "async"],
)
def test_each_rl_step_records_its_time_phases_and_throughput(
    tmp_path, monkeypatch, overrides, phases
):
    report_peak_memory(monkeypatch, gib=3.0)
    config = {**COMMON, **overrides}
    kitchen.run("rl_basic", config, backend=fake_backend(), log_dir=tmp_path)
    records = step_records(tmp_path)
    assert [r["step"] for r in records] == [0, 1, 2]
    assert_step_times(records, phases)
    assert [r["memory/peak_gib"] for r in records] == [3.0] * 3
    assert "time/rollouts" in records[0] or overrides.get("mode")  # the older key stays
