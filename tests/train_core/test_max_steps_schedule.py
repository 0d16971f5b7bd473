"""max_steps shortens the LR schedule as tinker-cookbook 0.6.1's does: the schedule's total is the
data's steps (batches x epochs) capped by max_steps; without max_steps it is unchanged. Checked
against the cookbook's own rule (supervised `_resolve_total_steps`, RL `_resolve_end_batch`) and
its multiplier, on the learning rates the fake backend's optim_step receives."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from kitchen.adapters.fake import FakeBackend
from kitchen.app.launch import run
from tests.helpers import chat_files
from train_core.schedules import schedule_steps

CASES = [(5, 1, None), (5, 2, None), (5, 2, 3), (5, 1, 5), (4, 3, 12), (1, 1, 1)]


@pytest.mark.parametrize(("n_batches", "epochs", "max_steps"), CASES)
def test_the_schedules_total_is_the_cookbooks(n_batches, epochs, max_steps) -> None:
    sl = pytest.importorskip("tinker_cookbook.supervised.train")
    rl = pytest.importorskip("tinker_cookbook.rl.train")
    ours = schedule_steps(n_batches * epochs, max_steps)
    assert ours == sl._resolve_total_steps(max_steps, n_batches, epochs)
    assert ours == rl._resolve_end_batch(max_steps, n_batches, epochs)


def test_a_max_steps_past_the_data_warns_and_keeps_the_datas_steps(caplog) -> None:
    with caplog.at_level(logging.WARNING, logger="train_core.schedules"):
        assert schedule_steps(6, 10) == 6
    assert caplog.messages == [
        "max_steps=10 exceeds the 6 steps the data makes (batches x epochs); training stops "
        "after 6 steps"
    ]


def _cookbook_lrs(base: float, total: int, steps: int) -> list[float]:
    lr = pytest.importorskip("tinker_cookbook.utils.lr_scheduling")
    return [base * lr.compute_schedule_lr_multiplier("linear", s, total) for s in range(steps)]


@pytest.mark.parametrize("max_steps", [None, 2])
def test_sl_basic_decays_over_the_steps_it_runs(tmp_path: Path, max_steps: int | None) -> None:
    train, _ = chat_files(tmp_path, 12)  # 3 batches of 4 per epoch
    values = {"dataset": train, "batch_size": 4, "num_epochs": 2, "save_every": 0,
              "no_register": True, "learning_rate": 1e-3, "lr_schedule": "linear"}  # fmt: skip
    fake = FakeBackend()
    result = run("sl_basic", values, backend=fake, log_dir=tmp_path / "run", max_steps=max_steps)
    total = 6 if max_steps is None else max_steps
    assert result.steps == total
    assert fake.optim_lrs == pytest.approx(_cookbook_lrs(1e-3, total, total))
    progress = [m["progress"] for m in result.metrics if "progress" in m]
    assert progress[-1] == pytest.approx(1.0)


def test_a_max_steps_key_in_the_config_shortens_the_schedule_too(tmp_path: Path) -> None:
    """`max_steps=2` (tinker-cookbook's run key) means what --max-steps means."""
    train, _ = chat_files(tmp_path)
    values = {"dataset": train, "batch_size": 4, "save_every": 0, "no_register": True,
              "learning_rate": 1e-3, "lr_schedule": "linear", "max_steps": 2}  # fmt: skip
    fake = FakeBackend()
    result = run("sl_basic", values, backend=fake, log_dir=tmp_path / "run")
    assert result.steps == 2
    assert fake.optim_lrs == pytest.approx(_cookbook_lrs(1e-3, 2, 2))


def test_rl_decays_over_the_steps_it_runs() -> None:
    """Kitchen's RL takes an LR schedule (the cookbook's RL has none); its total is capped the
    same way, as the cookbook caps its RL end batch."""
    from tests.rl_workflow.test_workflow_fake import ArithmeticRL, config

    fake = FakeBackend()
    cfg = config(num_batches=6, learning_rate=1e-3, lr_schedule="linear")
    result = run(ArithmeticRL(), cfg, backend=fake, max_steps=2)
    assert result.steps == 2
    assert fake.optim_lrs == pytest.approx(_cookbook_lrs(1e-3, 2, 2))
