"""Reinforcement learning core: env protocol, rollouts, advantages, datums, metrics.

Pure logic over tinker.types; the stages of `kitchen.workflows.reinforcement` call into it.
"""

from train_core.rl import types
from train_core.rl.advantages import (
    ADVANTAGE_ESTIMATORS,
    compute_advantages,
    compute_turn_advantages,
    group_mean_advantages,
    register_advantage_estimator,
    register_turn_advantage_estimator,
)
from train_core.rl.data import (
    assemble_training_data,
    datum_for_loss,
    keep_informative_groups,
    remove_constant_reward_groups,
    trajectory_to_data,
)
from train_core.rl.gae import gae_turn_advantages  # registers the "gae" estimator
from train_core.rl.kl import compute_kl_sample_train
from train_core.rl.metrics import compute_trajectory_metrics
from train_core.rl.rollouts import do_batch_rollouts, do_group_rollout, do_single_rollout
from train_core.rl.types import *  # noqa: F403  (the RL types are this package's vocabulary)

__all__ = [
    "ADVANTAGE_ESTIMATORS",
    "assemble_training_data",
    "compute_advantages",
    "compute_kl_sample_train",
    "compute_trajectory_metrics",
    "compute_turn_advantages",
    "datum_for_loss",
    "do_batch_rollouts",
    "do_group_rollout",
    "do_single_rollout",
    "gae_turn_advantages",
    "group_mean_advantages",
    "keep_informative_groups",
    "register_advantage_estimator",
    "register_turn_advantage_estimator",
    "remove_constant_reward_groups",
    "trajectory_to_data",
]
__all__ += types.__all__  # every public name of rl.types, listed once there
