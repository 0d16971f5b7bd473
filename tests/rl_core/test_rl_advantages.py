import numpy as np
import pytest
from rl_core_fakes import single_turn_group
from tinker import types

from train_core.rl.advantages import (
    ADVANTAGE_ESTIMATORS,
    compute_advantages,
    register_advantage_estimator,
)
from train_core.rl.types import Trajectory, TrajectoryGroup


def test_group_mean_centres_rewards_without_std_division():
    groups = [single_turn_group([1.0, 0.0, 0.0, 3.0]), single_turn_group([2.0, 2.0])]
    advantages_P = compute_advantages(groups)
    np.testing.assert_allclose(advantages_P[0], [0.0, -1.0, -1.0, 2.0])
    np.testing.assert_allclose(advantages_P[1], [0.0, 0.0])


def test_group_rewards_add_to_step_rewards():
    group = single_turn_group([1.0, 0.0])
    group.final_rewards_G = [0.0, 3.0]  # the group reward lifts the second trajectory to 3
    assert group.get_total_rewards() == [1.0, 3.0]
    np.testing.assert_allclose(compute_advantages([group])[0], [-1.0, 1.0])


def test_multi_turn_total_reward_sums_steps():
    group = single_turn_group([0.5])
    traj = group.trajectories_G[0]
    two_turns = Trajectory([traj.transitions[0], traj.transitions[0]], types.ModelInput.empty())
    assert TrajectoryGroup([two_turns], [0.25], [{}]).get_total_rewards() == [1.25]


def test_registered_estimator_is_used_by_name():
    @register_advantage_estimator("test_rank")
    def rank(group: TrajectoryGroup) -> np.ndarray:
        return np.argsort(np.argsort(group.get_total_rewards())).astype(float)

    try:
        out = compute_advantages([single_turn_group([5.0, -1.0, 2.0])], estimator="test_rank")
        np.testing.assert_allclose(out[0], [2.0, 0.0, 1.0])
    finally:
        del ADVANTAGE_ESTIMATORS["test_rank"]


def test_unknown_estimator_names_the_known_ones():
    with pytest.raises(ValueError, match="group_mean"):
        compute_advantages([single_turn_group([1.0])], estimator="group_men")


def test_estimator_with_wrong_shape_is_rejected():
    register_advantage_estimator("test_bad")(lambda g: np.zeros(5))
    try:
        with pytest.raises(ValueError, match="one value per trajectory"):
            compute_advantages([single_turn_group([1.0, 2.0])], estimator="test_bad")
    finally:
        del ADVANTAGE_ESTIMATORS["test_bad"]
