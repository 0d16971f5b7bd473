"""RL train stages: KL penalty against a reference, the policy-gradient step with substeps, the
post-update KL, and streaming minibatches (train on groups as they finish)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

import numpy as np
from tinker import types

from kitchen.engine.stage import Context, Metrics
from kitchen.workflows.common.train_step import AdamSettings, Update
from kitchen.workflows.reinforcement.agents import AGENTS_PORT, AgentRollouts, Seam, settle
from kitchen.workflows.reinforcement.rollout import RolloutSampling, group_rollout_tasks
from kitchen.workflows.reinforcement.stages import assemble
from train_core.schedules import lr_at

T = TypeVar("T")


def split_into(items: Sequence[T], n: int) -> list[list[T]]:
    """`items` in min(n, len) contiguous chunks whose sizes differ by at most one (earlier ones
    larger), as tinker-cookbook splits a batch into substeps."""
    if n < 1:
        raise ValueError(f"split_into: n is {n}; expected at least 1")
    n = min(n, len(items))
    size, extra = divmod(len(items), n) if n else (0, 0)
    chunks, start = [], 0
    for i in range(n):
        end = start + size + (1 if i < extra else 0)
        chunks.append(list(items[start:end]))
        start = end
    return chunks


async def kl_penalize(
    reference_client: Any, data_D: list[types.Datum], coef: float, discount: float
) -> tuple[list[types.Datum], Metrics]:
    """Advantages penalised for drifting from the reference policy (reference logprobs of the
    full sequences from `reference_client`)."""
    from train_core.rl.kl import incorporate_kl_penalty
    from train_core.scoring import score_full_sequences

    base_logprobs_D = await score_full_sequences(reference_client, data_D)
    return incorporate_kl_penalty(data_D, base_logprobs_D, coef, discount)


@dataclass(frozen=True, kw_only=True)
class ApplyKLPenalty:
    """Add -coef * (KL to the reference) to the advantages of action tokens (centred over the
    batch, as tinker-cookbook does); `kl_policy_base` is the mean logp_sampler - logp_reference."""

    coef: float
    discount: float = 0.0
    name: str = "apply_kl_penalty"
    phase: ClassVar[str] = "reference"
    reads: frozenset[str] = frozenset({"train_data", "reference_client"})
    writes: frozenset[str] = frozenset({"train_data"})

    async def __call__(self, ctx: Context[Any]) -> Metrics | None:
        data_D, metrics = await kl_penalize(
            ctx.state.reference_client, ctx.state.train_data, self.coef, self.discount
        )
        ctx.state.train_data = data_D
        return metrics


def pass_summary(
    metrics_S: list[dict[str, float]], loss_sum: float, data_D: list[Any]
) -> dict[str, float]:
    """crucible_kitchen's ppo_metrics of one pass: policy_loss per sampled token, and the
    engine's clip_fraction (ppo, cispo) where it reports one; substeps weigh equally."""
    out: dict[str, float] = {}
    for key in ("policy_loss", "clip_fraction"):
        values = [m[f"{key}:mean"] for m in metrics_S if f"{key}:mean" in m]
        if values:
            out[key] = float(np.mean(values))
    if "policy_loss" not in out:  # backends without per-token diagnostics: loss:sum per token
        trained = sum(
            int(np.count_nonzero(d.loss_fn_inputs["logprobs"].to_numpy())) for d in data_D
        )
        out["policy_loss"] = loss_sum / max(trained, 1)
    return out


def policy_pass(
    update: Update, client: Any, data: list[types.Datum], loss_fn: str, config: Any
) -> None:
    """One forward_backward pass of the policy loss: the engine's built-in by name, or a loss
    computed beside it (train_core.losses.CLIENT_SIDE_LOSSES: stable_reinforce)."""
    from train_core.losses import CLIENT_SIDE_LOSSES

    beside = CLIENT_SIDE_LOSSES.get(loss_fn)
    if beside is None:
        update.forward_backward(client.forward_backward, data, loss_fn, config)
    else:
        update.forward_backward(client.forward_backward_custom, data, beside(config))


@dataclass(frozen=True, kw_only=True)
class TrainStep:
    """forward_backward with the RL loss, then optim_step, on each of `num_substeps` contiguous
    minibatches, `ppo_epochs` times over this step's datums. Every pass sees the same datums,
    whose `logprobs` are the sampler's, so the ratio's old policy stays the one that sampled.
    All requests are queued before any is awaited; `training_logprobs` come from the first pass
    (pre-update weights)."""

    learning_rate: float
    loss_fn: str = "importance_sampling"
    loss_fn_config: Mapping[str, float] | None = None
    num_substeps: int = 1
    ppo_epochs: int = 1
    lr_schedule: str = "constant"
    adam: AdamSettings = field(default_factory=AdamSettings)
    name: str = "train_step"
    reads: frozenset[str] = frozenset({"training_client", "train_data", "total_steps"})
    writes: frozenset[str] = frozenset({"training_logprobs", "ppo_metrics"})

    async def __call__(self, ctx: Context[Any]) -> Metrics | None:
        from train_core.rl import datum_for_loss
        from train_core.scoring import forward_logprobs

        client, state = ctx.state.training_client, ctx.state
        t0 = time.perf_counter()
        lr = lr_at(state.step, state.total_steps, self.learning_rate, self.lr_schedule)
        config = dict(self.loss_fn_config) if self.loss_fn_config else None
        chunks = [
            [datum_for_loss(d, self.loss_fn) for d in c]
            for c in split_into(state.train_data, self.num_substeps)
        ]
        submitted = []
        for epoch in range(self.ppo_epochs):
            for chunk in chunks:
                update = Update(ctx.clock, client)
                policy_pass(update, client, chunk, self.loss_fn, config)
                submitted.append((epoch, update.optim_step(self.adam.params(lr))))
        logprobs_D: list[Any] = []
        losses = [0.0] * self.ppo_epochs
        optim_metrics: dict[str, float] = {}
        last_pass: list[dict[str, float]] = []  # engine metrics of the last pass, per substep
        for epoch, pending in submitted:
            done = await pending
            (output,) = done.passes
            losses[epoch] += float((output.metrics or {}).get("loss:sum", 0.0))
            if epoch == 0:
                logprobs_D.extend(forward_logprobs(output))
            if epoch == self.ppo_epochs - 1:
                last_pass.append(dict(output.metrics or {}))
            optim_metrics = dict(done.optim.metrics or {})
        state.training_logprobs = logprobs_D
        state.ppo_metrics = pass_summary(last_pass, losses[-1], state.train_data)
        metrics: Metrics = {
            "optim/lr": lr,
            "learning_rate": lr,
            "optim/substeps": len(chunks),
            "optim/epochs": self.ppo_epochs,
        }
        if self.ppo_epochs > 1:
            metrics.update({f"optim/loss_sum_epoch_{e}": loss for e, loss in enumerate(losses)})
        # tokens through forward_backward: every datum once per pass
        metrics["num_tokens"] = self.ppo_epochs * sum(
            d.model_input.length for c in chunks for d in c
        )
        return {**metrics, "time/train": time.perf_counter() - t0, **optim_metrics}


@dataclass(frozen=True, kw_only=True)
class ComputePostKL:
    """How far this step moved the policy on its own data (kl_pre_post_v1/v2; costs a scoring
    pass with the updated weights)."""

    name: str = "compute_post_kl"
    reads: frozenset[str] = frozenset({"training_client", "train_data"})
    writes: frozenset[str] = frozenset()

    async def __call__(self, ctx: Context[Any]) -> Metrics | None:
        from train_core.rl.kl import compute_post_kl
        from train_core.scoring import score_full_sequences

        sampler = ctx.state.training_client.save_weights_and_get_sampling_client()
        new_logprobs_D = await score_full_sequences(sampler, ctx.state.train_data)
        return compute_post_kl(ctx.state.train_data, new_logprobs_D)


@dataclass(frozen=True, kw_only=True)
class MinibatchRecipe:
    """How a minibatch of groups becomes datums (advantages, filtering, KL penalty): what
    ComputeAdvantages, AssembleData and ApplyKLPenalty do to a whole batch."""

    estimator: str = "group_mean"
    remove_constant_reward_groups: bool = False
    kl_penalty_coef: float = 0.0
    kl_discount_factor: float = 0.0

    async def datums(
        self, groups_P: list[Any], reference_client: Any
    ) -> tuple[list, list[Any], Metrics]:
        """(datums, the groups' advantages, KL metrics)."""
        from train_core.rl import compute_turn_advantages

        advantages_P = compute_turn_advantages(groups_P, self.estimator)
        data_D, _ = assemble(groups_P, advantages_P, self.remove_constant_reward_groups)
        if self.kl_penalty_coef <= 0:
            return data_D, advantages_P, {}
        data_D, metrics = await kl_penalize(
            reference_client, data_D, self.kl_penalty_coef, self.kl_discount_factor
        )
        return data_D, advantages_P, metrics


@dataclass(frozen=True, kw_only=True)
class StreamRolloutsAndTrain:
    """Streaming minibatches: roll out every group concurrently and submit forward_backward on
    each `minibatch_size` groups as soon as they have finished; one optim_step per iteration.
    Each group's advantages are computed once, with its minibatch, and kept for the transcripts."""

    sampling: RolloutSampling
    learning_rate: float
    minibatch_size: int
    recipe: MinibatchRecipe = field(default_factory=MinibatchRecipe)
    loss_fn: str = "importance_sampling"
    loss_fn_config: Mapping[str, float] | None = None
    lr_schedule: str = "constant"
    adam: AdamSettings = field(default_factory=AdamSettings)
    # repr=False: the plan of a classic env run (no agents) reads as it did before the seam
    agents: AgentRollouts | None = field(default=None, repr=False)
    name: str = "stream_rollouts_and_train"
    writes: frozenset[str] = frozenset(
        {
            "env_group_builders",
            "trajectory_groups",
            "group_versions",
            "advantages",
            "train_data",
            "training_logprobs",
        }
    )

    @property
    def reads(self) -> frozenset[str]:
        base = {"sampling_client", "training_client", "dataset", "batch_idx", "policy_version"}
        kl = {"reference_client"} if self.recipe.kl_penalty_coef > 0 else set()
        return frozenset({*base, "total_steps", *kl})

    @property
    def ports(self) -> frozenset[str]:
        return frozenset({AGENTS_PORT}) if self.agents is not None else frozenset()

    async def __call__(self, ctx: Context[Any]) -> Metrics | None:
        from train_core.rl import datum_for_loss
        from train_core.scoring import forward_logprobs

        state = ctx.state
        client = state.training_client
        reference = state.reference_client if self.recipe.kl_penalty_coef > 0 else None
        builders_P = list(state.dataset.get_batch(state.batch_idx))
        policy_for = self.sampling.group_policies(state.sampling_client, state.batch_idx)
        seam = Seam.of(ctx, self.agents, str(state.batch_idx))
        outcomes_P: list[Any] = [None] * len(builders_P)
        groups_P: list[Any] = [None] * len(builders_P)
        advantages_P: list[Any] = [None] * len(builders_P)
        config = dict(self.loss_fn_config) if self.loss_fn_config else None
        update = Update(ctx.clock, client)
        data_D, waiting, metrics = [], [], {}
        clock = ctx.clock  # the waits for groups, reference, the update: each its own phase
        async with group_rollout_tasks(builders_P, policy_for, seam) as tasks:
            for i_finished, next_done in enumerate(asyncio.as_completed(tasks)):
                with clock.phase("sampling"):
                    i, outcome = await next_done
                outcomes_P[i], groups_P[i] = outcome, outcome.group
                if outcome.group is not None:  # an agent group with too few rollouts left: none
                    waiting.append(i)
                if len(waiting) < self.minibatch_size and i_finished + 1 < len(tasks):
                    continue
                if not waiting:
                    continue
                with clock.phase("reference") if reference else contextlib.nullcontext():
                    mb_data, mb_advantages, mb_metrics = await self.recipe.datums(
                        [groups_P[w] for w in waiting], reference
                    )
                for w, advantages in zip(waiting, mb_advantages, strict=True):
                    advantages_P[w] = advantages
                trained = [datum_for_loss(d, self.loss_fn) for d in mb_data]
                policy_pass(update, client, trained, self.loss_fn, config)
                data_D.extend(mb_data)
                metrics.update(mb_metrics)
                waiting = []
        kept_P = [i for i, group in enumerate(groups_P) if group is not None]
        builders_P, groups_P, agent_metrics = settle(builders_P, outcomes_P, self.agents)
        metrics.update(agent_metrics)
        lr = lr_at(state.step, state.total_steps, self.learning_rate, self.lr_schedule)
        done = await update.optim_step(self.adam.params(lr))
        state.training_logprobs = [lp for fb in done.passes for lp in forward_logprobs(fb)]
        metrics.update(done.optim.metrics or {})
        state.env_group_builders, state.trajectory_groups = builders_P, groups_P
        state.group_versions = [state.policy_version] * len(groups_P)
        state.advantages, state.train_data = [advantages_P[i] for i in kept_P], data_D
        metrics["num_tokens"] = sum(d.model_input.length for d in data_D)
        minibatches = len(done.passes)
        return {"optim/lr": lr, "learning_rate": lr, "stream/minibatches": minibatches, **metrics}
