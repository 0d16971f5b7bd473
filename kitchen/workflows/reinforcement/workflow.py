"""Reinforcement learning on verifiable envs, as tinker-cookbook's rl/train.py: each iteration samples
with the current weights, centres rewards per group, and takes a policy-gradient step.

Three modes, each its own small workflow over the same stages:
- sync: roll out the whole batch, then train on it (every sample from policy version == step);
- streaming: train on minibatches of groups as they finish, one optim_step per iteration;
- async: rollouts run ahead of the learner on possibly stale weights, within max_steps_off_policy.
`reinforcement_flat` is the minimal loop of tinker-cookbook's rl_loop: no modes, no evaluation.
"""

from __future__ import annotations

from kitchen.engine.graph import Every, Loop, Node, When, Workflow
from kitchen.workflows.common.checkpoint import SaveCheckpoint, SaveFinal
from kitchen.workflows.common.setup import InitTrainingClient
from kitchen.workflows.common.start import StartPoint, register, start_point
from kitchen.workflows.reinforcement.async_pool import (
    CollectGroups,
    PublishSampler,
    StartRolloutPool,
    StopRolloutPool,
)
from kitchen.workflows.reinforcement.config import RLConfig, RLLoopConfig
from kitchen.workflows.reinforcement.rollout import DoRollouts, EvaluateRL, WriteRollouts
from kitchen.workflows.reinforcement.stages import (
    AssembleData,
    BuildRLDataset,
    ComputeAdvantages,
    InitReferenceClient,
    LogRLStep,
    RefreshSampler,
    RLDatasetFactory,
)
from kitchen.workflows.reinforcement.state import RLState
from kitchen.workflows.reinforcement.train import (
    ApplyKLPenalty,
    ComputePostKL,
    MinibatchRecipe,
    StreamRolloutsAndTrain,
    TrainStep,
)


def setup(
    cfg: RLLoopConfig,
    make_dataset: RLDatasetFactory,
    start: StartPoint,
    reference_model: str | None = None,
) -> list[Node]:
    """The training client, the env datasets, and (for a KL penalty) the reference sampler."""
    return [
        InitTrainingClient(
            start.model_name,
            lora_rank=cfg.lora_rank,
            renderer_name=cfg.renderer_name,
            seed=cfg.seed,
            load_checkpoint_path=start.load_checkpoint_path,
        ),
        BuildRLDataset(make_dataset, cfg.num_batches),
        *([InitReferenceClient(reference_model)] if reference_model else []),
    ]


def _train(cfg: RLConfig) -> list[Node]:
    """Datums from this step's groups, then the policy-gradient update (sync and async)."""
    kl = (
        [ApplyKLPenalty(cfg.kl.penalty_coef, cfg.kl.discount_factor)]
        if cfg.kl.penalty_coef > 0
        else []
    )
    return [
        ComputeAdvantages(cfg.advantage_estimator),
        AssembleData(cfg.remove_constant_reward_groups),
        *kl,
        TrainStep(
            cfg.optimizer.learning_rate,
            cfg.loss_fn,
            cfg.loss_fn_config,
            cfg.num_substeps,
            cfg.optimizer.schedule,
        ),
    ]


def _evaluate(cfg: RLConfig, report: bool = False) -> EvaluateRL:
    return EvaluateRL(cfg.max_tokens, cfg.evaluation.temperature, report=report)


def _body(cfg: RLConfig) -> list[Node]:
    rollouts = DoRollouts(cfg.max_tokens, cfg.temperature, cfg.coalesce_samples)
    evaluate = (
        [When(Every(cfg.evaluation.every, "step", offset=0), [_evaluate(cfg)])]
        if cfg.evaluation.every
        else []
    )
    post_kl = [ComputePostKL()] if cfg.kl.compute_post_kl else []
    save = (
        [When(Every(cfg.checkpoint.save_every, "step"), [SaveCheckpoint()])]
        if cfg.checkpoint.save_every
        else []
    )
    if cfg.mode == "sync":
        return [
            RefreshSampler(),
            *evaluate,
            rollouts,
            WriteRollouts(),
            *_train(cfg),
            *post_kl,
            LogRLStep(),
            *save,
        ]
    if cfg.mode == "streaming":
        stream = StreamRolloutsAndTrain(
            cfg.max_tokens,
            cfg.optimizer.learning_rate,
            cfg.stream_minibatch_size,
            cfg.temperature,
            cfg.coalesce_samples,
            MinibatchRecipe(
                cfg.advantage_estimator,
                cfg.remove_constant_reward_groups,
                cfg.kl.penalty_coef,
                cfg.kl.discount_factor,
            ),
            cfg.loss_fn,
            cfg.loss_fn_config,
            cfg.optimizer.schedule,
        )
        return [RefreshSampler(), *evaluate, stream, WriteRollouts(), *post_kl, LogRLStep(), *save]
    # async: the sampler is published by the previous step; rollouts never wait for this one.
    return [
        *evaluate,
        CollectGroups(cfg.groups_per_batch),
        WriteRollouts(),
        *_train(cfg),
        *post_kl,
        LogRLStep(),
        PublishSampler(),
        *save,
    ]


def reinforcement(
    cfg: RLConfig, make_dataset: RLDatasetFactory, recipe: str = "reinforcement"
) -> Workflow[RLState]:
    """The RL workflow of `cfg.mode` over the env dataset `make_dataset` builds; the final model
    is registered as `recipe` (unless --no-register)."""
    start = start_point(cfg, cfg.checkpoint.load_path)
    pool: list[Node] = []
    if cfg.mode == "async":
        pool = [
            StartRolloutPool(
                cfg.groups_per_batch,
                cfg.max_steps_off_policy,
                cfg.max_tokens,
                cfg.temperature,
                cfg.coalesce_samples,
            )
        ]
    final_eval = [RefreshSampler(), _evaluate(cfg, report=True)] if cfg.evaluation.every else []
    # The KL reference is the base the run started from, adapters off (or the model named).
    reference = (cfg.kl.reference_model or start.model_name) if cfg.kl.penalty_coef > 0 else None
    return Workflow(
        f"reinforcement_{cfg.mode}",
        RLState,
        steps=[
            *setup(cfg, make_dataset, start, reference),
            *pool,
            Loop("iteration", "n_batches", "batch_idx", steps=True, body=_body(cfg)),
            *final_eval,
            SaveFinal(),
            *register(cfg, recipe, start),
        ],
        finally_=[StopRolloutPool()] if cfg.mode == "async" else [],
    )  # fmt: skip


def reinforcement_flat(
    cfg: RLLoopConfig, make_dataset: RLDatasetFactory, recipe: str = "reinforcement_flat"
) -> Workflow[RLState]:
    """The minimal loop (tinker-cookbook's rl_loop): sample with the current weights, centre the
    rewards per group, drop groups with no signal, one policy-gradient step; log, save."""
    start = start_point(cfg, cfg.checkpoint.load_path)
    return Workflow(
        "reinforcement_flat",
        RLState,
        steps=[
            *setup(cfg, make_dataset, start),
            Loop("iteration", "n_batches", "batch_idx", steps=True, body=[
                RefreshSampler(),
                DoRollouts(cfg.max_tokens, cfg.temperature, cfg.coalesce_samples),
                WriteRollouts(),
                ComputeAdvantages("group_mean"),
                AssembleData(remove_constant_reward_groups=True),
                TrainStep(cfg.optimizer.learning_rate, cfg.loss_fn, cfg.loss_fn_config, 1, cfg.optimizer.schedule),
                LogRLStep(),
                *([When(Every(cfg.checkpoint.save_every, "step"), [SaveCheckpoint()])] if cfg.checkpoint.save_every else []),
            ]),
            SaveFinal(),
            *register(cfg, recipe, start),
        ],
    )  # fmt: skip
