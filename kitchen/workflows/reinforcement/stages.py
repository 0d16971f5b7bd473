"""RL stages: the env dataset, the policy's sampler, advantages, datums and the step's metrics.

Rollouts and transcripts live in `rollout.py`, the train step and streaming in `train.py`, async
off-policy sampling in `async_pool.py`, the code sandbox in `sandbox.py`. The math is in
`train_core.rl`.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any

import numpy as np

from kitchen.engine.errors import DataError
from kitchen.engine.stage import Context, Metrics
from train_core.rl.types import RLDatasetFactory, RLEnvContext

# The env contracts live in train_core.rl.types; envs that import them from here still can.


@dataclass(frozen=True, kw_only=True)
class BuildRLDataset:
    """Build the env datasets with the run's renderer (and, with `sandboxed`, the run's code
    sandbox: `make(env_ctx, sandbox)`); `n_batches` = len(train), capped by `num_batches`, and
    one pass over them is the run (`total_steps` = `n_batches`)."""

    make: RLDatasetFactory
    num_batches: int | None = None
    sandboxed: bool = False
    name: str = "build_rl_dataset"
    writes: frozenset[str] = frozenset({"dataset", "test_dataset", "n_batches", "total_steps"})
    ports: frozenset[str] = frozenset({"datasets"})

    @property
    def reads(self) -> frozenset[str]:
        return frozenset({"renderer", "tokenizer", *(["sandbox"] if self.sandboxed else [])})

    async def __call__(self, ctx: Context[Any]) -> Metrics | None:
        env_ctx = RLEnvContext(ctx.state.renderer, ctx.state.tokenizer, ctx.datasets)
        built = self.make(env_ctx, ctx.state.sandbox) if self.sandboxed else self.make(env_ctx)
        train, test = await built if inspect.isawaitable(built) else built
        if len(train) == 0:
            raise DataError(f"RL dataset {type(train).__name__} has no batches")
        n = len(train) if self.num_batches is None else min(len(train), self.num_batches)
        ctx.state.dataset, ctx.state.test_dataset = train, test
        ctx.state.n_batches = ctx.state.total_steps = n
        ctx.logger.info("RL dataset: %d iterations (%d batches available)", n, len(train))
        return None


@dataclass(frozen=True, kw_only=True)
class RefreshSampler:
    """A sampler on the current weights: every rollout of this step is on-policy
    (policy_version == step)."""

    name: str = "refresh_sampler"
    reads: frozenset[str] = frozenset({"training_client"})
    writes: frozenset[str] = frozenset({"sampling_client", "policy_version"})
    ports: frozenset[str] = frozenset({"backend"})

    def __call__(self, ctx: Context[Any]) -> Metrics | None:
        client = ctx.state.training_client
        ctx.state.sampling_client = client.save_weights_and_get_sampling_client()
        ctx.state.policy_version = ctx.state.step
        return None


@dataclass(frozen=True, kw_only=True)
class ComputeAdvantages:
    """Per group, per trajectory, one advantage per turn by the named estimator (group_mean:
    GRPO centring, no std, broadcast to every turn; gae: per turn with `gamma`, `lam`)."""

    estimator: str = "group_mean"
    gamma: float = 1.0
    lam: float = 1.0
    name: str = "compute_advantages"
    reads: frozenset[str] = frozenset({"trajectory_groups"})
    writes: frozenset[str] = frozenset({"advantages"})

    def __call__(self, ctx: Context[Any]) -> Metrics | None:
        from train_core.rl import compute_turn_advantages

        ctx.state.advantages = compute_turn_advantages(
            ctx.state.trajectory_groups, self.estimator, self.gamma, self.lam
        )
        return None


def assemble(
    groups_P: list[Any], advantages_P: list[Any], informative_only: bool
) -> tuple[list, list]:
    """(datums, the groups they came from): each trajectory rendered once, each turn's advantage
    on its action tokens; with `informative_only`, groups of equal rewards are left out."""
    from train_core.rl import assemble_training_data, keep_informative_groups

    if informative_only:
        groups_P, advantages_P = keep_informative_groups(groups_P, advantages_P)
    return assemble_training_data(groups_P, advantages_P)[0], groups_P


@dataclass(frozen=True, kw_only=True)
class AssembleData:
    """Trajectories -> datums (each turn's advantage on its action tokens, prefix-merged turns).
    With `remove_constant_reward_groups`, groups whose rewards are all equal carry no datums."""

    remove_constant_reward_groups: bool = False
    name: str = "assemble_data"
    reads: frozenset[str] = frozenset({"trajectory_groups", "advantages"})
    writes: frozenset[str] = frozenset({"train_data"})

    def __call__(self, ctx: Context[Any]) -> Metrics | None:
        data_D, groups_P = assemble(
            ctx.state.trajectory_groups, ctx.state.advantages, self.remove_constant_reward_groups
        )
        ctx.state.train_data = data_D
        return {"num_datums": len(data_D), "num_groups_trained": len(groups_P)}


def version_metrics(versions_P: list[int], step: int) -> Metrics:
    """Which weights the groups were sampled from (tinker-cookbook's sampling_client/* keys)."""
    versions = np.asarray(versions_P, dtype=np.float64)
    return {
        "sampling_client/step_max": float(versions.max()),
        "sampling_client/step_min": float(versions.min()),
        "sampling_client/step_mean": float(versions.mean()),
        "async/staleness_max": float(step - versions.min()),
        "async/staleness_mean": float(step - versions.mean()),
    }


@dataclass(frozen=True, kw_only=True)
class LogRLStep:
    """The step's metrics under tinker-cookbook's keys: env/all/*, by_group/*, optim/kl_*,
    optim/entropy, progress/*."""

    name: str = "log_rl_step"
    reads: frozenset[str] = frozenset(
        {
            "trajectory_groups",
            "env_group_builders",
            "group_versions",
            "train_data",
            "training_logprobs",
            "total_steps",
            "batch_idx",
            "ppo_metrics",
        }
    )
    writes: frozenset[str] = frozenset({"rollout_metrics", "ppo_metrics"})

    def __call__(self, ctx: Context[Any]) -> Metrics | None:
        from train_core.rl import compute_kl_sample_train, compute_trajectory_metrics

        state = ctx.state
        tags_P = [b.logging_tags() for b in state.env_group_builders]
        done_frac = (state.step + 1) / state.total_steps
        metrics: Metrics = {
            "progress/batch": state.batch_idx,
            "progress/done_frac": done_frac,
            "progress": done_frac,
            **compute_trajectory_metrics(state.trajectory_groups, tags_P),
            **version_metrics(state.group_versions, state.step),
        }
        try:
            metrics.update(compute_kl_sample_train(state.train_data, state.training_logprobs))
        except ValueError as e:  # no action tokens at all (every turn masked): nothing to compare
            ctx.logger.warning("skipping kl_sample_train: %s", e)
        rewards = [r for g in state.trajectory_groups for r in g.get_total_rewards()]
        state.rollout_metrics = {
            "reward_mean": float(np.mean(rewards)),
            "reward_std": float(np.std(rewards)),
            "num_trajectories": float(len(rewards)),
        }
        if "optim/entropy" in metrics:
            state.ppo_metrics = {**state.ppo_metrics, "entropy": float(metrics["optim/entropy"])}
        return metrics
