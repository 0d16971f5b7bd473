"""Step time through the tinker adapter (the real SDK against `kitchen serve`): each step's
record has its wall time, its phases and its throughput, as on the embedded backends."""

from __future__ import annotations

import pytest

from tests.helpers import assert_step_times, step_records

from .conftest import TwoSteps


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
    recipe: str, phases: tuple[str, ...], two_steps: TwoSteps
) -> None:
    _, log_dir = two_steps(recipe)
    records = step_records(log_dir)
    assert [r["step"] for r in records] == [0, 1]
    assert_step_times(records, phases)
