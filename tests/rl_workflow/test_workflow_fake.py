"""The reinforcement workflow end to end on the fake backend: the loss sent, which policy version
produced every sample, no future left unawaited, in each mode."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from cookbook.envs.arithmetic import ArithmeticEnvs
from kitchen.adapters.fake.backend import FakeTrainingClient
from kitchen.app.launch import run
from kitchen.engine.recipe import Recipe
from kitchen.workflows.reinforcement import RLConfig, reinforcement
from tests.helpers import record_forward_backward
from tests.rl_workflow.helpers import SlowFirstGroup, fake_backend
from train_core.losses import CLIENT_SIDE_LOSSES, POLICY_LOSSES

G, N = 3, 2  # groups per batch, envs per group


class ArithmeticRL(Recipe[RLConfig]):
    """Test recipe: RLConfig over arithmetic envs (optionally wrapped)."""

    name = "rl_test"
    Config = RLConfig

    def __init__(self, wrap: Any = None, test_problems: int = 0) -> None:
        self.wrap, self.test_problems = wrap, test_problems

    def workflow(self, cfg: RLConfig) -> Any:
        envs = ArithmeticEnvs(G, N, n_batches=50, max_operand=20, test_problems=self.test_problems)

        def make(ctx: Any) -> Any:
            train, test = envs(ctx)
            return (self.wrap(train) if self.wrap else train), test

        return reinforcement(cfg, make)


def config(**overrides: Any) -> RLConfig:
    values = {
        "groups_per_batch": G,
        "group_size": N,
        "num_batches": 3,
        "max_tokens": 8,
        "eval_every": 0,
        "save_every": 0,
        **overrides,
    }
    return RLConfig(**values)


def test_sync_samples_every_step_from_the_current_policy():
    fake = fake_backend()
    result = run(ArithmeticRL(), config(), backend=fake)
    assert fake.sample_policy_versions == [0] * G * N + [1] * G * N + [2] * G * N
    assert fake.loss_fns == ["importance_sampling"] * 3
    assert fake.unawaited == 0
    assert result.steps == 3 and result.state.policy_version == 2
    assert fake.calls.count("sample") == 3 * G  # one call per group: its N prompts merged


def test_sync_logs_tinker_cookbook_metric_keys():
    result = run(ArithmeticRL(), config(), backend=fake_backend())
    steps = [m for m in result.metrics if "env/all/reward/total" in m]
    assert [m["step"] for m in steps] == [0, 1, 2]
    for key in (
        "env/all/reward/total",
        "env/all/correct",
        "env/all/format",
        "env/all/by_group/frac_mixed",
        "optim/kl_sample_train_v1",
        "optim/entropy",
        "progress",
        "progress/done_frac",
        "learning_rate",
        "optim/lr",
        "time/total",
        "time/rollouts",
    ):
        assert key in steps[0], key
    # the responder is right on every other sample: each group of 2 has one right, one wrong
    assert steps[0]["env/all/correct"] == pytest.approx(0.5)
    assert steps[0]["env/all/by_group/frac_mixed"] == 1.0
    assert steps[-1]["progress"] == pytest.approx(1.0)


LOSS_CONFIGS = {
    "ppo": {"clip_low_threshold": 0.7, "clip_high_threshold": 1.3},
    "cispo": {"clip_low_threshold": 0.5, "clip_high_threshold": 2.0},
    "gspo": {"clip_low_threshold": 0.9, "clip_high_threshold": 1.1},
    "dro": {"beta": 0.1},
}


@pytest.mark.parametrize("loss_fn", POLICY_LOSSES)  # every loss the config takes
def test_the_configured_loss_and_its_config_are_sent(monkeypatch, loss_fn):
    loss_fn_config = LOSS_CONFIGS.get(loss_fn)
    calls = record_forward_backward(monkeypatch, FakeTrainingClient)
    fake = fake_backend()
    run(ArithmeticRL(), config(loss_fn=loss_fn, loss_fn_config=loss_fn_config), backend=fake)
    beside = loss_fn in CLIENT_SIDE_LOSSES  # computed beside the engine: forward_backward_custom
    assert fake.loss_fns == ["custom" if beside else loss_fn] * 3
    assert [c.loss_fn_config for c in calls] == ([] if beside else [loss_fn_config] * 3)
    assert fake.unawaited == 0


def test_substeps_split_the_batch_with_an_optim_step_each():
    fake = fake_backend()
    result = run(ArithmeticRL(), config(num_substeps=2), backend=fake)
    assert fake.calls.count("forward_backward") == 6 and fake.calls.count("optim_step") == 6
    # the fake's sampler version counts optim steps: two per iteration
    assert fake.sample_policy_versions == [0] * G * N + [2] * G * N + [4] * G * N
    assert [m["optim/substeps"] for m in result.metrics if "optim/substeps" in m] == [2, 2, 2]
    assert fake.unawaited == 0


def test_streaming_trains_minibatches_with_one_optim_step_per_iteration():
    fake = fake_backend()
    result = run(ArithmeticRL(), config(mode="streaming", stream_minibatch_size=2), backend=fake)
    # 3 groups in minibatches of 2: forward_backward on 2 groups, then on the last one
    assert fake.loss_fns == ["importance_sampling"] * 6
    assert fake.calls.count("optim_step") == 3
    assert fake.sample_policy_versions == [0] * G * N + [1] * G * N + [2] * G * N
    steps = [m for m in result.metrics if "env/all/reward/total" in m]
    assert [m["stream/minibatches"] for m in steps] == [2, 2, 2]
    assert fake.unawaited == 0


def test_async_trains_within_max_steps_off_policy_and_shuts_down_cleanly():
    fake = fake_backend()
    result = run(
        ArithmeticRL(), config(mode="async", max_steps_off_policy=1, num_batches=5), backend=fake
    )
    steps = [m for m in result.metrics if "env/all/reward/total" in m]
    assert [m["step"] for m in steps] == [0, 1, 2, 3, 4]
    for m in steps:
        assert m["step"] - m["sampling_client/step_min"] <= 1
        assert m["async/staleness_max"] <= 1
    # sampling ran ahead: some step trained on groups from the previous weights
    assert max(m["async/staleness_max"] for m in steps) == 1
    assert fake.loss_fns == ["importance_sampling"] * 5
    assert max(fake.sample_policy_versions) <= 5
    assert fake.unawaited == 0
    assert not result.state.rollout_pool._tasks  # every rollout task finished or was cancelled


def test_async_drops_groups_older_than_the_bound_and_rolls_them_out_again():
    fake = fake_backend()
    after_three_steps = lambda: fake.calls.count("optim_step") >= 3  # noqa: E731
    result = run(
        ArithmeticRL(wrap=lambda ds: SlowFirstGroup(ds, after_three_steps)),
        config(mode="async", max_steps_off_policy=1, num_batches=4),
        backend=fake,
    )
    steps = [m for m in result.metrics if "env/all/reward/total" in m]
    assert len(steps) == 4
    # the slow group came back 3 versions late: dropped, sampled again with current weights
    assert all(m["async/staleness_max"] <= 1 for m in steps)
    assert sum(m["async/dropped_groups"] for m in steps) >= 1
    assert sum(m["env/all/total_episodes"] for m in steps) == 4 * G * N
    assert fake.unawaited == 0


def test_kl_penalty_scores_against_the_base_model_and_changes_the_advantages():
    fake = fake_backend()
    result = run(ArithmeticRL(), config(kl_penalty_coef=0.5, num_batches=3), backend=fake)
    assert "create_sampling_client" in fake.calls  # the reference: the base model's sampler
    assert fake.calls.count("compute_logprobs") == 3 * G * N
    kl = [m["kl_policy_base"] for m in result.metrics if "kl_policy_base" in m]
    # step 0 samples from the base weights: no drift; later steps drift from the reference
    assert kl[0] == pytest.approx(0.0) and kl[2] > kl[1] > 0
    assert fake.unawaited == 0


def test_evaluation_reports_test_set_reward_before_steps_and_at_the_end():
    fake = fake_backend()
    result = run(ArithmeticRL(test_problems=4), config(eval_every=2, num_batches=3), backend=fake)
    evals = {m["step"]: m for m in result.metrics if "test/env/all/reward/total" in m}
    assert sorted(evals) == [0, 2, 3]  # pre-step at 0 and 2, final weights after step 2
    assert evals[0]["test/env/all/total_episodes"] == 4
    # the final evaluation is what the model registry records for this run
    assert (
        result.state.eval_results["test/env/all/reward/total"]
        == evals[3]["test/env/all/reward/total"]
    )
    assert result.state.registered_model["name"] == "reinforcement"
    assert fake.unawaited == 0


def test_rollout_transcripts_and_checkpoints_are_written(tmp_path):
    fake = fake_backend()
    run(ArithmeticRL(), config(save_every=2, num_batches=3), backend=fake, log_dir=tmp_path)
    lines = (tmp_path / "rollouts" / "iter_000001.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]
    assert [r["group"] for r in records] == list(range(G))
    assert records[0]["policy_version"] == 1 and records[0]["tags"] == ["arithmetic"]
    traj = records[0]["trajectories"][0]
    assert "What is" in traj["turns"][0]["prompt"] and traj["reward"] in (1.0, 0.0, -0.1)
    assert traj["turns"][0]["response"]
    assert sorted(p.name for p in (tmp_path / "rollouts").iterdir()) == [
        f"iter_{i:06d}.jsonl" for i in range(3)
    ]
    checkpoints = [json.loads(x) for x in (tmp_path / "checkpoints.jsonl").read_text().splitlines()]
    assert [c["name"] for c in checkpoints] == ["000002", "final"]


@pytest.mark.parametrize("mode", ["sync", "streaming", "async"])
def test_each_transcript_turn_shows_the_advantage_it_trained_with(tmp_path, monkeypatch, mode):
    """The transcripts read the step's advantages, not a second estimate: per step they are the
    values forward_backward received, and each is its reward minus its group's mean."""
    trained: dict[int, list[float]] = {}
    original = FakeTrainingClient.forward_backward

    def forward_backward(self: Any, data: Any, loss_fn: Any, loss_fn_config: Any = None) -> Any:
        for d in data:  # one turn per datum here: its action tokens carry one advantage
            values = {float(a) for a in d.loss_fn_inputs["advantages"].to_numpy() if a}
            trained.setdefault(self.version, []).extend(values)
        return original(self, data, loss_fn, loss_fn_config)

    monkeypatch.setattr(FakeTrainingClient, "forward_backward", forward_backward)
    run(ArithmeticRL(), config(mode=mode), backend=fake_backend(), log_dir=tmp_path)
    for step in range(3):
        lines = (tmp_path / "rollouts" / f"iter_{step:06d}.jsonl").read_text().splitlines()
        shown = []
        for group in map(json.loads, lines):
            rewards = [t["reward"] for t in group["trajectories"]]
            for traj in group["trajectories"]:
                (turn,) = traj["turns"]
                assert turn["advantage"] == pytest.approx(traj["reward"] - np.mean(rewards))
                shown.append(turn["advantage"])
        assert sorted(shown) == pytest.approx(sorted(trained[step])), step


def test_resume_continues_from_the_checkpoint_without_replaying(tmp_path):
    fake = fake_backend()
    run(
        ArithmeticRL(),
        config(save_every=1, num_batches=4),
        backend=fake,
        log_dir=tmp_path,
        max_steps=2,
    )
    fake2 = fake_backend()
    fake2.states.update(fake.states)
    result = run(
        ArithmeticRL(),
        config(save_every=1, num_batches=4),
        backend=fake2,
        log_dir=tmp_path,
        if_exists="resume",
    )
    assert result.steps == 4
    assert fake2.sample_policy_versions == [2] * G * N + [3] * G * N
    steps = [json.loads(x)["step"] for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [s for s in steps if s is not None] == sorted(set(steps))


def test_remove_constant_reward_groups_trains_only_on_mixed_groups():
    fake = fake_backend()
    fake.responder = lambda prompt: "0"  # always wrong: every group constant
    result = run(ArithmeticRL(), config(remove_constant_reward_groups=True), backend=fake)
    trained = [m["num_groups_trained"] for m in result.metrics if "num_groups_trained" in m]
    assert trained == [1, 1, 1]  # all constant: the first group is kept, with zero advantages
    assert fake.unawaited == 0


def test_streaming_submits_a_minibatch_before_the_slow_group_finishes():
    fake = fake_backend()
    after_first_minibatch = lambda: "forward_backward" in fake.calls  # noqa: E731
    run(
        ArithmeticRL(wrap=lambda ds: SlowFirstGroup(ds, after_first_minibatch)),
        config(mode="streaming", stream_minibatch_size=2, num_batches=1),
        backend=fake,
    )
    calls = [c for c in fake.calls if c in ("sample", "forward_backward", "optim_step")]
    # two fast groups -> their minibatch trains while the slow group is still rolling out
    assert calls == [
        "sample",
        "sample",
        "forward_backward",
        "sample",
        "forward_backward",
        "optim_step",
    ]
    assert fake.unawaited == 0


def test_async_failure_still_stops_every_rollout_in_finally():
    from kitchen.engine.errors import BackendError
    from kitchen.engine.runner import BaseHook

    class Capture(BaseHook):
        def on_run_end(self, state: Any, error: BaseException | None) -> None:
            self.pool, self.error = state.rollout_pool, error

    fake = fake_backend()
    fake.fail_on = {"optim_step"}
    hook = Capture()
    with pytest.raises(BackendError, match="optim_step failed"):
        run(ArithmeticRL(), config(mode="async", num_batches=4), backend=fake, hooks=[hook])
    assert hook.error is not None
    assert hook.pool is not None and not hook.pool._tasks  # cancelled and awaited in finally_


def test_a_loop_config_runs_as_the_minimal_sync_loop():
    from kitchen.workflows.reinforcement import RLLoopConfig
    from kitchen.workflows.reinforcement.stages import AssembleData, ComputeAdvantages

    cfg = RLLoopConfig(groups_per_batch=G, group_size=N, num_batches=2, save_every=5)
    wf = reinforcement(cfg, ArithmeticEnvs(G, N, n_batches=50, test_problems=2))
    (loop,) = [s for s in wf.nodes if getattr(s, "name", "") == "iteration"]
    names = [getattr(s, "name", type(s).__name__) for s in loop.body]
    assert wf.name == "reinforcement_sync" and "evaluate_rl" not in wf.render()
    assert names[:4] == ["refresh_sampler", "do_rollouts", "compute_advantages", "write_rollouts"]
    assert ComputeAdvantages(estimator="group_mean") in loop.body
    assert AssembleData(remove_constant_reward_groups=True) in loop.body
    registered = [s for s in wf.nodes if getattr(s, "name", "") == "register_model"]
    assert registered and registered[0].config["checkpoint"]["save_every"] == 5  # as given


def test_every_mode_samples_its_rollouts_with_the_configs_settings():
    from kitchen.workflows.reinforcement.rollout import RolloutSampling

    settings = {"max_tokens": 7, "temperature": 0.5, "coalesce_samples": False, "seed": 3}
    expected = RolloutSampling(max_tokens=7, temperature=0.5, coalesce=False, seed=3)

    def flat(nodes: Any) -> list[Any]:
        return [m for s in nodes for m in [s, *flat(getattr(s, "body", []))]]

    for mode in ("sync", "streaming", "async"):
        wf = reinforcement(config(mode=mode, **settings), ArithmeticEnvs(G, N, n_batches=50))
        samplers = [n.sampling for n in flat(wf.nodes) if hasattr(n, "sampling")]
        assert samplers == [expected], mode


@pytest.mark.parametrize("mode", ["sync", "streaming"])
def test_the_lr_schedule_runs_over_the_runs_steps(mode):
    settings = {"stream_minibatch_size": 1} if mode == "streaming" else {}
    cfg = config(mode=mode, lr_schedule="linear", learning_rate=3e-4, **settings)
    result = run(ArithmeticRL(), cfg, backend=fake_backend())
    lrs = [m["learning_rate"] for m in result.metrics if "learning_rate" in m]
    assert lrs == pytest.approx([3e-4, 2e-4, 1e-4])  # linear over 3 steps: 1 - s/3
