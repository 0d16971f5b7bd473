"""Distillation steps report their wall time, phases and throughput (fake backend): on-policy
with the student's sampling and the teacher's scoring, prompt distillation as supervised steps."""

from __future__ import annotations

import kitchen
from kitchen.adapters.fake import FakeBackend
from tests.helpers import assert_step_times, step_records

COMMON = {"save_every": 0, "no_register": True, "max_tokens": 64}


def test_on_policy_steps_record_sampling_teacher_scoring_and_the_update(tmp_path):
    overrides = {"num_batches": 3, "groups_per_batch": 2, "group_size": 2}
    kitchen.run(
        "on_policy_distillation", {**COMMON, **overrides}, backend=FakeBackend(), log_dir=tmp_path
    )
    records = step_records(tmp_path)
    assert [r["step"] for r in records] == [0, 1, 2]
    assert_step_times(records, ("sampling", "reference", "forward_backward", "optim_step"))


def test_prompt_distillation_steps_record_the_update(tmp_path):
    overrides = {"max_prompts": 12, "batch_size": 4, "num_epochs": 1, "num_samples_to_show": 0,
                 "no_register": True}  # fmt: skip
    kitchen.run("prompt_distillation", overrides, backend=FakeBackend(), log_dir=tmp_path)
    records = step_records(tmp_path)
    assert [r["step"] for r in records] == [0, 1, 2]
    assert_step_times(records, ("forward_backward", "optim_step"))
