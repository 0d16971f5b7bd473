"""Stages code RL adds to the RL stages: the sandbox that runs the model's programs, env datasets
built with it, per-turn GAE advantages, and several optimizer passes (PPO epochs) per batch."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kitchen.engine.errors import DataError
from kitchen.engine.stage import Context, Metrics
from kitchen.workflows.reinforcement.stages import RLEnvContext, keep_informative_groups
from kitchen.workflows.reinforcement.train import adam_params, split_into, step_lr
from kitchen.workflows.supervised.stages import AdamSettings

SandboxedDatasetFactory = Callable[
    [RLEnvContext, Any], Awaitable[tuple[Any, Any]] | tuple[Any, Any]
]
"""(env ctx, sandbox) -> (train RLDataset, test RLDataset | None), sync or async."""


@dataclass(frozen=True)
class FirstStep:
    """Predicate: no training step has run yet (false on a resumed run past step 0)."""

    reads: frozenset[str] = frozenset({"step"})

    def __call__(self, state: Any) -> bool:
        return int(state.step) == 0

    def __str__(self) -> str:
        return "step == 0"


@dataclass(frozen=True)
class OpenSandbox:
    """The code sandbox (`local`: bubblewrap jails here; `http`: a SandboxFusion service). With
    `check`, one trivial program runs at once, so a machine that cannot sandbox fails at the
    start rather than in the middle of the first rollout."""

    backend: str = "local"
    url: str | None = None
    max_concurrency: int | None = None
    check: bool = True
    name: str = "open_sandbox"
    reads: frozenset[str] = frozenset()
    writes: frozenset[str] = frozenset({"sandbox"})

    async def __call__(self, ctx: Context[Any]) -> Metrics | None:
        from kitchen.engine.registry import SANDBOXES

        sandbox = SANDBOXES.get(self.backend)(url=self.url, max_concurrency=self.max_concurrency)
        ctx.state.sandbox = sandbox
        check = getattr(sandbox, "check", None)
        if self.check and check is not None:
            await asyncio.to_thread(check)
        ctx.logger.info("sandbox %s (%d at a time)", self.backend, sandbox.max_concurrency)
        return None


@dataclass(frozen=True)
class CloseSandbox:
    """Stop the sandbox's worker threads (runs in flight finish first)."""

    name: str = "close_sandbox"
    reads: frozenset[str] = frozenset({"sandbox"})
    writes: frozenset[str] = frozenset({"sandbox"})

    def __call__(self, ctx: Context[Any]) -> Metrics | None:
        sandbox = ctx.state.sandbox
        if sandbox is not None and hasattr(sandbox, "close"):
            sandbox.close()
        ctx.state.sandbox = None
        return None


@dataclass(frozen=True)
class BuildSandboxedRLDataset:
    """BuildRLDataset for envs that run code: `make(env_ctx, sandbox)`; `n_batches` = len(train),
    capped by `num_batches` when given."""

    make: SandboxedDatasetFactory
    num_batches: int | None = None
    name: str = "build_rl_dataset"
    reads: frozenset[str] = frozenset({"renderer", "tokenizer", "sandbox"})
    writes: frozenset[str] = frozenset({"dataset", "test_dataset", "n_batches"})
    ports: frozenset[str] = frozenset({"datasets"})

    async def __call__(self, ctx: Context[Any]) -> Metrics | None:
        env_ctx = RLEnvContext(ctx.state.renderer, ctx.state.tokenizer, ctx.datasets)
        built = self.make(env_ctx, ctx.state.sandbox)
        train, test = await built if inspect.isawaitable(built) else built
        if len(train) == 0:
            raise DataError(f"RL dataset {type(train).__name__} has no batches")
        n = len(train) if self.num_batches is None else min(len(train), self.num_batches)
        ctx.state.dataset, ctx.state.test_dataset, ctx.state.n_batches = train, test, n
        ctx.logger.info("RL dataset: %d iterations (%d batches available)", n, len(train))
        return None


@dataclass(frozen=True)
class ComputeTurnAdvantages:
    """Per group, per trajectory: one GAE advantage per turn (train_core.rl.gae; the baseline
    is the group's mean discounted return)."""

    gamma: float = 1.0
    lam: float = 1.0
    name: str = "compute_turn_advantages"
    reads: frozenset[str] = frozenset({"trajectory_groups"})
    writes: frozenset[str] = frozenset({"advantages"})

    def __call__(self, ctx: Context[Any]) -> Metrics | None:
        from train_core.rl.gae import gae_turn_advantages

        groups_P = ctx.state.trajectory_groups
        ctx.state.advantages = [gae_turn_advantages(g, self.gamma, self.lam) for g in groups_P]
        return None


@dataclass(frozen=True)
class AssembleTurnData:
    """Trajectories -> datums with each turn's own advantage on its action tokens. With
    `remove_constant_reward_groups`, groups whose total rewards are all equal carry no datums."""

    remove_constant_reward_groups: bool = False
    name: str = "assemble_data"
    reads: frozenset[str] = frozenset({"trajectory_groups", "advantages"})
    writes: frozenset[str] = frozenset({"train_data"})

    def __call__(self, ctx: Context[Any]) -> Metrics | None:
        from train_core.rl.gae import assemble_turn_advantage_data

        groups_P, advantages_P = ctx.state.trajectory_groups, ctx.state.advantages
        if self.remove_constant_reward_groups:
            groups_P, advantages_P = keep_informative_groups(groups_P, advantages_P)
        data_D, _ = assemble_turn_advantage_data(groups_P, advantages_P)
        ctx.state.train_data = data_D
        return {"num_datums": len(data_D), "num_groups_trained": len(groups_P)}


@dataclass(frozen=True)
class TrainEpochs:
    """`epochs` optimizer passes over this step's datums (PPO epochs): every pass runs
    forward_backward + optim_step on each of `num_substeps` contiguous minibatches. Each pass
    sees the same datums, whose `logprobs` are the sampler's, so the old policy of the ratio
    stays the policy that sampled. All requests are queued before any is awaited; the backend
    applies them in order. `training_logprobs` come from the first pass (pre-update weights)."""

    learning_rate: float
    loss_fn: str = "importance_sampling"
    loss_fn_config: Mapping[str, float] | None = None
    num_substeps: int = 1
    epochs: int = 1
    lr_schedule: str = "constant"
    adam: AdamSettings = field(default_factory=AdamSettings)
    name: str = "train_step"
    reads: frozenset[str] = frozenset({"training_client", "train_data", "n_batches"})
    writes: frozenset[str] = frozenset({"training_logprobs"})

    async def __call__(self, ctx: Context[Any]) -> Metrics | None:
        from train_core.rl import remove_mask
        from train_core.rl.kl import training_logprobs_from_output

        client, state = ctx.state.training_client, ctx.state
        lr = step_lr(state.step, state.n_batches, self.learning_rate, self.lr_schedule)
        config = dict(self.loss_fn_config) if self.loss_fn_config else None
        chunks = [
            [remove_mask(d) for d in chunk]
            for chunk in split_into(state.train_data, self.num_substeps)
        ]
        submitted = [
            (
                epoch,
                client.forward_backward(chunk, self.loss_fn, config),
                client.optim_step(adam_params(lr, self.adam)),
            )
            for epoch in range(self.epochs)
            for chunk in chunks
        ]
        logprobs_D: list[Any] = []
        losses = [0.0] * self.epochs
        optim_metrics: dict[str, float] = {}
        for epoch, fb, optim in submitted:
            output = await fb
            losses[epoch] += float((output.metrics or {}).get("loss:sum", 0.0))
            if epoch == 0:
                logprobs_D.extend(training_logprobs_from_output(output))
            optim_metrics = dict((await optim).metrics or {})
        state.training_logprobs = logprobs_D
        per_epoch = {f"optim/loss_sum_epoch_{e}": loss for e, loss in enumerate(losses)}
        return {
            "optim/lr": lr,
            "learning_rate": lr,
            "optim/substeps": len(chunks),
            "optim/epochs": self.epochs,
            **(per_epoch if self.epochs > 1 else {}),
            **optim_metrics,
        }
