"""Resume equals uninterrupted, for every workflow and mode: a run stopped after its step-3
record (its last checkpoint is after step 2) and resumed logs each step once, with the metrics and
final weights of a run never stopped. Async RL samples ahead on older weights, so its resumed
steps may differ (docs/resume.md); it is held to "each step once, the steps before the stop equal".
Code RL's envs render in threads, so the order in which a group's requests arrive is
timing-dependent; each env draws its own seeds, and its transcripts are also compared exactly."""

from __future__ import annotations

from pathlib import Path

import pytest

from kitchen.app.launch import run
from kitchen.engine.runner import BaseHook
from tests.resume.cases import NAMES, STEPS, assert_same_run, cases, metrics_by_step

pytestmark = pytest.mark.slow


class StopAfter(BaseHook):
    """Interrupts the run once step `step` has ended (metrics written, not yet checkpointed)."""

    def __init__(self, step: int) -> None:
        self.step = step

    def on_step_end(self, step: int, metrics: object) -> None:
        if step == self.step:
            raise KeyboardInterrupt


@pytest.mark.parametrize("name", NAMES)
def test_resume_equals_uninterrupted(name: str, tmp_path: Path) -> None:
    recipe, overrides = cases(tmp_path)[name]
    straight, stopped = tmp_path / "straight", tmp_path / "stopped"
    run(recipe, overrides, backend="local", log_dir=straight, max_steps=STEPS)
    with pytest.raises(KeyboardInterrupt):
        run(recipe, overrides, backend="local", log_dir=stopped, max_steps=STEPS,
            hooks=[StopAfter(STEPS - 1)])  # fmt: skip
    result = run(
        recipe, overrides, backend="local", log_dir=stopped, max_steps=STEPS, if_exists="resume"
    )
    assert result.steps == STEPS
    if name == "rl_async":
        a, b = metrics_by_step(straight), metrics_by_step(stopped)
        assert sorted(a) == sorted(b) == list(range(STEPS))
        assert a[0] == b[0] and a[1] == b[1]
        return
    assert_same_run(straight, stopped)
    if name == "code_rl":
        for step in range(STEPS):
            transcript = f"rollouts/iter_{step:06d}.jsonl"
            assert (straight / transcript).read_text() == (stopped / transcript).read_text(), step
