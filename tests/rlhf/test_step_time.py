"""rlhf_pair_pref's sections each report their steps' wall time, phases and throughput in their
own metrics.jsonl (fake backend)."""

from __future__ import annotations

import kitchen
from tests.helpers import assert_step_times, step_records

FAST = {"num_batches": 2, "rl_eval_every": 1, "num_eval_prompts": 3, "pm_eval_every": 0,
        "group_size": 3, "groups_per_batch": 2, "no_register": True,
        "max_comparisons": 16, "tournament": "all_pairs_one_way"}  # fmt: skip


def test_every_section_records_its_steps_time_phases_and_throughput(tmp_path):
    kitchen.run("rlhf_pair_pref", FAST, backend="fake", log_dir=tmp_path)
    update = ("forward_backward", "optim_step")
    for section, phases in [
        ("sft", update),
        ("preference_model", update),
        ("rl", ("sampling", "evaluation", *update)),
    ]:
        records = step_records(tmp_path / section)
        assert [r["step"] for r in records] == [0, 1], section
        assert_step_times(records, phases)
