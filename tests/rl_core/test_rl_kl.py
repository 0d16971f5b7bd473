from types import SimpleNamespace

import numpy as np
import pytest
from rl_core_fakes import transition
from tinker import types

from train_core.rl.data import trajectory_to_data
from train_core.rl.kl import (
    compute_kl_sample_train,
    compute_post_kl,
    discounted_future_sum,
    incorporate_kl_penalty,
)
from train_core.rl.types import Trajectory
from train_core.scoring import forward_logprobs, full_sequence, target_logprobs


def make_data():
    t1 = transition([1, 2, 3], [7, 8], logprob=-0.5)
    t2 = transition([1, 2, 3, 7, 8, 50], [9], logprob=-1.5)
    t3 = transition([4, 5], [6, 6, 6], logprob=-0.2)
    data = trajectory_to_data(Trajectory([t1, t2], types.ModelInput.empty()), 1.0)
    data += trajectory_to_data(Trajectory([t3], types.ModelInput.empty()), -1.0)
    return data


def test_kl_sample_train_matches_direct_computation():
    data = make_data()
    rng = np.random.default_rng(0)
    training = [rng.normal(-1.0, 0.3, d.model_input.length) for d in data]
    sampled = np.concatenate([[-0.5, -0.5, -1.5], [-0.2, -0.2, -0.2]])
    trained = np.concatenate([training[0][[2, 3, 5]], training[1][[1, 2, 3]]])
    diff = sampled - trained
    m = compute_kl_sample_train(data, training)
    assert m["optim/kl_sample_train_v1"] == pytest.approx(diff.mean())
    assert m["optim/kl_sample_train_v2"] == pytest.approx(0.5 * np.mean(diff**2))
    assert m["optim/entropy"] == pytest.approx(-sampled.mean())
    # Only action tokens count: the prompt columns of `training` are random and far off.
    assert m["sampler/logprob_gap"] == pytest.approx(np.abs(diff).mean())


def test_kl_reads_a_forward_backward_output():
    data = make_data()
    outputs = SimpleNamespace(
        loss_fn_outputs=[
            {"logprobs": types.TensorData.from_numpy(d.loss_fn_inputs["logprobs"].to_numpy())}
            for d in data
        ]
    )
    m = compute_kl_sample_train(data, forward_logprobs(outputs))
    assert m["optim/kl_sample_train_v1"] == 0.0 and m["optim/kl_sample_train_v2"] == 0.0
    assert m["sampler/logprob_gap"] == 0.0


def test_kl_rejects_misaligned_logprobs():
    data = make_data()
    with pytest.raises(ValueError, match="expected equal lengths"):
        compute_kl_sample_train(data, [np.zeros(3), np.zeros(4)])


def test_post_kl_and_penalty_use_full_sequence_scores():
    data = make_data()
    full = [full_sequence(d) for d in data]
    assert full[0].to_ints() == [1, 2, 3, 7, 8, 50, 9]
    # Score every full-sequence position at -1 (position 0 unscored, as prompt logprobs are).
    scores = [target_logprobs([None] + [-1.0] * (f.length - 1)) for f in full]
    sampled = np.array([-0.5, -0.5, -1.5, -0.2, -0.2, -0.2])
    d = sampled + 1.0
    post = compute_post_kl(data, scores)
    assert post["kl_pre_post_v1"] == pytest.approx(d.mean())
    assert post["kl_pre_post_v2"] == pytest.approx(0.5 * np.mean(d**2))

    penalised, metrics = incorporate_kl_penalty(data, scores, kl_penalty_coef=0.5)
    assert metrics["kl_policy_base"] == pytest.approx(d.mean())
    adv0 = penalised[0].loss_fn_inputs["advantages"].to_numpy()
    expected_action = 1.0 + 0.5 * (d.mean() - d[:3])
    np.testing.assert_allclose(adv0[[2, 3, 5]], expected_action, rtol=1e-6)
    assert adv0[[0, 1, 4]].tolist() == [0.0, 0.0, 0.0]  # observation tokens untouched
    # The input datums are not modified.
    assert data[0].loss_fn_inputs["advantages"].to_numpy()[2] == 1.0


def test_discounted_future_sum():
    np.testing.assert_allclose(
        discounted_future_sum(np.array([1.0, 2.0, 4.0]), 0.5), [3.0, 4.0, 4.0]
    )


def test_other_policies_logprobs_must_align_with_the_targets():
    data = make_data()
    with pytest.raises(ValueError, match="compute_post_kl: datum 0 has 6 targets but 7 logprobs"):
        compute_post_kl(data, [np.zeros(7), np.zeros(3)])
