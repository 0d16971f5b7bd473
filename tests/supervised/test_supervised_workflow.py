"""The supervised workflow on the fake backend: pipelining, pre-step evaluation, resume."""

import json

import pytest

from kitchen.adapters.fake import FakeBackend
from kitchen.app.launch import run
from tests.helpers import tiny_sft_config


@pytest.fixture
def data(tmp_path):
    return tiny_sft_config(tmp_path, held_out=True, batch_size=4, num_samples_to_show=0)


def test_every_future_is_awaited_and_only_cross_entropy_is_sent(data, tmp_path):
    fake = FakeBackend()
    result = run("sl_basic", data, backend=fake, log_dir=tmp_path / "run")
    assert result.steps == 6
    assert fake.unawaited == 0
    assert set(fake.loss_fns) == {"cross_entropy"} and len(fake.loss_fns) == 6


def test_step_n_plus_one_is_submitted_before_step_n_is_awaited(data, tmp_path):
    fake = FakeBackend()
    run("sl_basic", {**data, "save_every": 0, "eval_every": 0}, backend=fake)
    events = [e for e in fake.events if "forward_backward" in e]
    assert events[:4] == [
        "forward_backward#1",
        "forward_backward#2",
        "await forward_backward#1",
        "forward_backward#3",
    ]


def test_evaluation_sees_pre_step_weights(data):
    fake = FakeBackend()
    result = run("sl_basic", {**data, "eval_every": 2, "save_every": 0}, backend=fake)
    evals = {m["step"]: m["test/nll"] for m in result.metrics if "test/nll" in m}
    # the fake's NLL after k optim steps is 2 / (1 + k/4); an evaluation at step k runs after k steps
    assert sorted(evals) == [0, 2, 4, 6]
    for step, nll in evals.items():
        assert nll == pytest.approx(2 / (1 + step / 4))


def test_train_nll_falls(data):
    result = run("sl_basic", data, backend=FakeBackend())
    nll = [m["train_mean_nll"] for m in result.metrics if "train_mean_nll" in m]
    assert len(nll) == 6 and nll == sorted(nll, reverse=True) and nll[-1] < nll[0]


def _train_records(log_dir):
    lines = (log_dir / "metrics.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, lines) if "train_mean_nll" in r]


def test_resume_continues_where_it_stopped_without_replay_or_skip(data, tmp_path):
    cfg = {**data, "save_every": 2, "eval_every": 0}
    straight = FakeBackend()
    run("sl_basic", cfg, backend=straight, log_dir=tmp_path / "a")

    resumed = (
        FakeBackend()
    )  # one backend across both runs: the fake keeps its checkpoints in memory
    run("sl_basic", cfg, backend=resumed, log_dir=tmp_path / "b", max_steps=3)
    run("sl_basic", cfg, backend=resumed, log_dir=tmp_path / "b", if_exists="resume")

    a, b = _train_records(tmp_path / "a"), _train_records(tmp_path / "b")
    assert [r["step"] for r in b] == list(range(6))  # each step exactly once
    assert [r["train_mean_nll"] for r in a] == [r["train_mean_nll"] for r in b]
    assert [r["learning_rate"] for r in a] == [r["learning_rate"] for r in b]
    assert straight.loss_fns.count("cross_entropy") == 6
    # the interrupted run saved after step 2 (checkpoint) and 3 (final); resume restarted from the final record
    assert resumed.loss_fns.count("cross_entropy") == 6
