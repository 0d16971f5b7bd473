"""The `gae` advantage estimator: per-turn GAE with the group's mean return as the baseline."""

from __future__ import annotations

import numpy as np
import pytest
from tinker import types

from tests.rl_core.rl_core_fakes import single_turn_group, transition
from train_core.rl import (
    ADVANTAGE_ESTIMATORS,
    assemble_training_data,
    compute_advantages,
    compute_turn_advantages,
    trajectory_to_data,
)
from train_core.rl.gae import gae_1d, gae_turn_advantages
from train_core.rl.types import Trajectory, TrajectoryGroup


def episode(rewards, ac_len=2, metrics=None):
    """A multi-turn episode whose observations extend each other (one datum)."""
    transitions, seen = [], []
    for t, r in enumerate(rewards):
        ob = [*seen, 50 + t]
        ac = list(range(100 + 10 * t, 100 + 10 * t + ac_len))
        transitions.append(transition(ob, ac, reward=r, metrics=(metrics or {}).get(t)))
        seen = ob + ac
    return Trajectory(transitions=transitions, final_ob=types.ModelInput.empty())


def group(*reward_lists):
    trajs = [episode(r) for r in reward_lists]
    return TrajectoryGroup(trajs, [0.0] * len(trajs), [{} for _ in trajs])


def direct_gae(rewards, baseline, gamma, lam):
    """sum_l (gamma lam)^l delta_{t+l}, written out."""
    n = len(rewards)
    values = [baseline] * n + [0.0]
    deltas = [rewards[t] + gamma * values[t + 1] - values[t] for t in range(n)]
    return [sum((gamma * lam) ** k * deltas[t + k] for k in range(n - t)) for t in range(n)]


@pytest.mark.parametrize("gamma,lam", [(1.0, 1.0), (0.9, 0.95), (0.5, 0.0), (1.0, 0.5)])
def test_gae_matches_the_written_out_sum(gamma, lam):
    rewards = np.array([0.3, -0.1, 0.0, 1.0])
    got = gae_1d(rewards, 0.4, gamma, lam)
    np.testing.assert_allclose(got, direct_gae(rewards, 0.4, gamma, lam), atol=1e-12)


def test_lambda_one_is_return_to_go_minus_the_group_mean_return():
    g = group([0.0, 0.0, 1.0], [0.5])  # returns 1.0 and 0.5 (gamma 1): baseline 0.75
    turns = gae_turn_advantages(g, 1.0, 1.0)
    np.testing.assert_allclose(turns[0], [0.25, 0.25, 0.25])
    np.testing.assert_allclose(turns[1], [-0.25])


def test_lambda_below_one_gives_earlier_turns_less_credit():
    g = group([0.0, 0.0, 1.0], [0.0])  # baseline 0.5; A_t = lam^(T-1-t) * (1 - 0.5) at gamma 1
    turns = gae_turn_advantages(g, 1.0, 0.5)
    np.testing.assert_allclose(turns[0], [0.125, 0.25, 0.5])


def test_discount_enters_the_baseline_and_the_deltas():
    g = group([0.0, 1.0], [1.0])  # discounted returns 0.5 and 1.0: baseline 0.75
    turns = gae_turn_advantages(g, 0.5, 1.0)
    # lambda 1: A_t = discounted return from t - b
    np.testing.assert_allclose(turns[0], [0.5 * 1.0 - 0.75, 1.0 - 0.75])
    np.testing.assert_allclose(turns[1], [1.0 - 0.75])


def test_group_reward_is_added_to_the_last_turn():
    traj = episode([0.0, 0.0])
    g = TrajectoryGroup([traj, episode([0.0])], [1.0, 0.0], [{}, {}])
    turns = gae_turn_advantages(g, 1.0, 0.0)  # baseline 0.5; TD errors
    np.testing.assert_allclose(turns[0], [0.0 + 0.5 - 0.5, 1.0 - 0.5])


def test_gae_is_registered_and_equals_group_mean_on_single_turn_groups():
    assert "gae" in ADVANTAGE_ESTIMATORS
    g = single_turn_group([1.0, 0.0, 0.0, 0.5])
    gae = compute_turn_advantages([g], "gae", gamma=0.9, lam=0.5)[0]
    np.testing.assert_allclose(gae, compute_turn_advantages([g], "group_mean")[0])


@pytest.mark.parametrize("gamma,lam", [(1.0, 1.0), (0.9, 0.95), (0.5, 0.0)])
def test_the_training_route_equals_gae_written_out(gamma, lam):
    """compute_turn_advantages (what ComputeAdvantages, the streaming step and the transcripts
    call) against GAE computed here from its definition: the baseline is the group's mean
    discounted return, V = baseline while the episode runs and 0 after; A_t = sum_l (gamma lam)^l
    delta_{t+l}, delta_t = r_t + gamma V_{t+1} - V_t. Intermediate rewards make per-turn values
    differ from one value per trajectory."""
    rewards = [[0.5, 0.0, 1.0], [0.0, -1.0], [0.25]]
    finals = [0.0, 2.0, 0.0]  # the group reward lands on the last turn
    g = TrajectoryGroup([episode(r) for r in rewards], finals, [{} for _ in rewards])
    per_turn = [[*r[:-1], r[-1] + f] for r, f in zip(rewards, finals, strict=True)]
    baseline = np.mean([sum(gamma**t * x for t, x in enumerate(r)) for r in per_turn])
    expected = []
    for r in per_turn:
        values = [baseline] * len(r) + [0.0]
        deltas = [r[t] + gamma * values[t + 1] - values[t] for t in range(len(r))]
        expected.append(
            [
                sum((gamma * lam) ** k * deltas[t + k] for k in range(len(r) - t))
                for t in range(len(r))
            ]
        )
    got = compute_turn_advantages([g], "gae", gamma=gamma, lam=lam)[0]
    for got_T, expected_T in zip(got, expected, strict=True):
        np.testing.assert_allclose(got_T, expected_T, atol=1e-12)


def test_gae_has_no_per_trajectory_value():
    with pytest.raises(ValueError, match=r"one advantage per turn.*compute_turn_advantages"):
        compute_advantages([group([1.0, 0.0], [0.0])], "gae")


def test_bad_parameters_fail_naming_them():
    with pytest.raises(ValueError, match="gamma"):
        gae_turn_advantages(group([1.0]), 1.5, 1.0)
    with pytest.raises(ValueError, match="lambda"):
        gae_turn_advantages(group([1.0]), 1.0, -0.1)


def test_each_turn_gets_its_own_advantage_on_its_action_tokens():
    traj = episode([0.0, 1.0], ac_len=2)
    (datum,) = trajectory_to_data(traj, [0.5, -2.0])
    targets = datum.loss_fn_inputs["target_tokens"].to_numpy().tolist()
    advantages = datum.loss_fn_inputs["advantages"].to_numpy()
    by_token = dict(zip(targets, advantages.tolist(), strict=True))
    assert by_token[100] == by_token[101] == 0.5  # turn 0's action
    assert by_token[110] == by_token[111] == -2.0  # turn 1's action
    assert by_token[51] == 0.0  # an observation token
    # The sampler's logprobs are kept (the PPO ratio's old policy), not the turn markers.
    mask = datum.loss_fn_inputs["mask"].to_numpy() > 0
    np.testing.assert_allclose(datum.loss_fn_inputs["logprobs"].to_numpy()[mask], -0.5)


def test_a_rewritten_history_starts_a_new_datum_with_its_turns_advantage():
    first = transition([1, 2], [100, 101], reward=0.0)
    second = transition([9, 9, 9], [110], reward=1.0)  # not an extension of the first
    traj = Trajectory([first, second], types.ModelInput.empty())
    d0, d1 = trajectory_to_data(traj, [0.25, 0.75])
    assert set(d0.loss_fn_inputs["advantages"].to_numpy().tolist()) == {0.0, 0.25}
    assert set(d1.loss_fn_inputs["advantages"].to_numpy().tolist()) == {0.0, 0.75}


def test_masked_turns_carry_no_advantage():
    traj = episode([0.0, 1.0], metrics={0: {"parse_error_masked": 1.0}})
    (datum,) = trajectory_to_data(traj, [0.5, 0.5])
    targets = datum.loss_fn_inputs["target_tokens"].to_numpy().tolist()
    by_token = dict(
        zip(targets, datum.loss_fn_inputs["advantages"].to_numpy().tolist(), strict=True)
    )
    assert by_token[100] == 0.0 and by_token[110] == 0.5


def test_assembly_checks_one_advantage_array_per_trajectory():
    g = group([1.0], [0.0])
    data, meta = assemble_training_data([g], compute_turn_advantages([g], "gae"))
    assert len(data) == 2 and meta == [
        {"group_idx": 0, "traj_idx": 0},
        {"group_idx": 0, "traj_idx": 1},
    ]
    with pytest.raises(ValueError, match="one per trajectory"):
        assemble_training_data([g], [[np.zeros(1)]])
    with pytest.raises(ValueError, match="one per turn"):
        assemble_training_data([g], [[np.zeros(2), np.zeros(1)]])


def test_a_per_trajectory_estimator_is_broadcast_to_every_turn():
    g = group([0.0, 1.0], [0.0])  # totals 1 and 0: group_mean gives 0.5 and -0.5
    turns = compute_turn_advantages([g], "group_mean")[0]
    assert [t.tolist() for t in turns] == [[0.5, 0.5], [-0.5]]
    data, _ = assemble_training_data([g], [compute_advantages([g])[0]])
    broadcast, _ = assemble_training_data([g], [turns])
    assert [d.loss_fn_inputs["advantages"].to_numpy().tolist() for d in data] == [
        d.loss_fn_inputs["advantages"].to_numpy().tolist() for d in broadcast
    ]
    with pytest.raises(ValueError, match="apply to the gae estimator"):
        compute_turn_advantages([g], "group_mean", gamma=0.9)


def test_gae_turn_advantages_take_gamma_and_lambda():
    g = group([0.0, 0.0, 1.0], [0.0])
    turns = compute_turn_advantages([g], "gae", gamma=1.0, lam=0.5)[0]
    np.testing.assert_allclose(turns[0], [0.125, 0.25, 0.5])
