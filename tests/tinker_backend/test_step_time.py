"""Step time through the tinker adapter (the real SDK against `kitchen serve`): each step's
record has its wall time, its phases and its throughput, as on the embedded backends."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import assert_step_times, step_records

from .test_recipes import run_two_steps


@pytest.mark.slow
@pytest.mark.parametrize(
    ("recipe", "phases"),
    [
        ("sl_basic", ("forward_backward", "optim_step")),
        ("dpo", ("reference", "forward_backward", "optim_step")),
        ("rl_basic", ("sampling", "forward_backward", "optim_step")),
    ],
)
def test_steps_record_time_phases_and_throughput_on_the_tinker_backend(
    recipe: str, phases: tuple[str, ...], sdk_env: str, tmp_path: Path
) -> None:
    run_two_steps(recipe, sdk_env, tmp_path)
    records = step_records(tmp_path)
    assert [r["step"] for r in records] == [0, 1]
    assert_step_times(records, phases)
