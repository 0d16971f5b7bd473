from __future__ import annotations

from typing import Any

from pydantic import Field

from kitchen.engine.state import Handle
from kitchen.workflows.common.state import TrainState


def _no_pool() -> Any:
    return None


class RLState(TrainState):
    """Reinforcement learning: envs -> rollouts -> advantages -> datums -> policy-gradient steps."""

    training_client: Handle[Any]
    tokenizer: Handle[Any]
    renderer: Handle[Any]
    sampling_client: Handle[Any]
    reference_client: Handle[Any]
    dataset: Handle[Any]
    test_dataset: Handle[Any]
    policy_version: int = Field(
        0, description="Training steps behind the weights of sampling_client (== step when fresh)"
    )
    n_batches: int | None = Field(
        None, description="Batches per epoch: RL makes one pass over its env dataset"
    )
    total_steps: int | None = Field(
        None,
        description="Training steps of the run (= n_batches, one pass); the LR schedule's length",
    )
    batch_idx: int = 0
    env_group_builders: list[Any] | None = Field(
        None, description="The builder of each trajectory group (for logging tags)"
    )
    trajectory_groups: list[Any] | None = Field(None, description="This step's TrajectoryGroups")
    group_versions: list[int] | None = Field(
        None, description="Per group: the policy version its samples came from"
    )
    advantages: list[Any] | None = Field(
        None, description="Per group, per trajectory: advantages_T, one per turn (computed once)"
    )
    train_data: list[Any] | None = Field(
        None, description="Datums with their `mask` column (stripped before forward_backward)"
    )
    training_logprobs: list[Any] | None = Field(
        None, description="Per datum: the learner's logprobs of its targets, from forward_backward"
    )
    rollout_metrics: dict[str, float] = Field(
        default_factory=dict,
        description="The last step's rollouts: reward_mean, reward_std, num_trajectories",
    )
    ppo_metrics: dict[str, float] = Field(
        default_factory=dict,
        description="The last step's policy_loss and entropy, and clip_fraction where the backend "
        "reports it (ppo, cispo)",
    )
    # Async mode: the pool of in-flight rollouts. A plain (not Handle) field with a default so the
    # finally_ stage that shuts it down may read it on every path, also when setup failed.
    rollout_pool: Any = Field(
        default_factory=_no_pool, exclude=True, description="AsyncRolloutPool (async mode)"
    )


def _no_sandbox() -> Any:
    return None


class CodeRLState(RLState, TrainState):
    """RL on code: the RL state plus the sandbox that runs the model's programs, and the final
    evaluation (HumanEval pass@k before and after training) for the model registry."""

    # A plain (not Handle) field with a default, so the finally_ stage that closes it may read it
    # on every path, also when the run failed before the sandbox was opened.
    sandbox: Any = Field(
        default_factory=_no_sandbox, exclude=True, description="The code sandbox (SandboxPort)"
    )
