"""Reinforcement learning on verifiable envs, as tinker-cookbook's rl/train.py: each iteration samples
with the current weights, turns rewards into per-turn advantages, and takes a policy-gradient step.

Three modes, each its own small loop body over the same sections:
- sync: roll out the whole batch, then train on it (every sample from policy version == step);
- streaming: train on minibatches of groups as they finish, one optim_step per iteration;
- async: rollouts run ahead of the learner on possibly stale weights, within max_steps_off_policy.
rl_loop's minimal loop (an RLLoopConfig) is the sync mode with no evaluation and no KL, skipping
groups without signal. Code RL (`code_workflow.py`) composes the same sections with a sandbox.
"""

from __future__ import annotations

from collections.abc import Mapping

from kitchen.engine.graph import Every, Loop, Node, When, Workflow
from kitchen.workflows.common.checkpoint import SaveCheckpoint, SaveFinal, rolling_checkpoints
from kitchen.workflows.common.clients import OpenSamplingClient
from kitchen.workflows.common.start import (
    StartPoint,
    init_training_client,
    registration_nodes,
    start_point,
)
from kitchen.workflows.reinforcement.agents import AgentRollouts, SetAgentPolicy
from kitchen.workflows.reinforcement.async_pool import (
    CollectGroups,
    PublishSampler,
    StartRolloutPool,
    StopRolloutPool,
)
from kitchen.workflows.reinforcement.config import (
    AgentRLConfig,
    PolicyGradientConfig,
    RLConfig,
    RLLoopConfig,
)
from kitchen.workflows.reinforcement.rollout import (
    DoRollouts,
    EvaluateRL,
    RolloutSampling,
    WriteRollouts,
)
from kitchen.workflows.reinforcement.stages import (
    AssembleData,
    BuildRLDataset,
    ComputeAdvantages,
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


def kl_reference(cfg: PolicyGradientConfig, start: StartPoint) -> str | None:
    """The KL reference: the base the run started from, adapters off (or the model named)."""
    return (cfg.kl.reference_model or start.model_name) if cfg.kl.penalty_coef > 0 else None


def setup(
    cfg: RLLoopConfig,
    make_dataset: RLDatasetFactory,
    start: StartPoint,
    *,
    reference_model: str | None = None,
    sandboxed: bool = False,
) -> list[Node]:
    """The training client, the env datasets (built on the run's sandbox when `sandboxed`), and
    (for a KL penalty) the reference sampler."""
    nodes: list[Node] = [
        init_training_client(cfg, start),
        BuildRLDataset(make=make_dataset, num_batches=cfg.num_batches, sandboxed=sandboxed),
    ]
    if reference_model:
        nodes.append(OpenSamplingClient(base_model=reference_model, into="reference_client"))
    return nodes


def train(
    cfg: PolicyGradientConfig,
    *,
    loss_fn_config: Mapping[str, float] | None,
    ppo_epochs: int = 1,
    gamma: float = 1.0,
    gae_lambda: float = 1.0,
) -> list[Node]:
    """This step's advantages (computed once; the transcripts show them), datums from its groups,
    then the policy-gradient update (sync and async)."""
    nodes: list[Node] = [
        ComputeAdvantages(estimator=cfg.advantage_estimator, gamma=gamma, lam=gae_lambda),
        WriteRollouts(),
        AssembleData(remove_constant_reward_groups=cfg.remove_constant_reward_groups),
    ]
    if cfg.kl.penalty_coef > 0:
        nodes.append(ApplyKLPenalty(coef=cfg.kl.penalty_coef, discount=cfg.kl.discount_factor))
    nodes.append(
        TrainStep(
            learning_rate=cfg.optimizer.learning_rate,
            loss_fn=cfg.loss_fn,
            loss_fn_config=loss_fn_config,
            num_substeps=cfg.num_substeps,
            ppo_epochs=ppo_epochs,
            lr_schedule=cfg.optimizer.schedule,
        )
    )
    return nodes


def evaluate(
    cfg: PolicyGradientConfig, *, report: bool = False, agents: AgentRollouts | None = None
) -> EvaluateRL:
    return EvaluateRL(
        max_tokens=cfg.max_tokens,
        temperature=cfg.evaluation.temperature,
        seed=cfg.seed,
        report=report,
        agents=agents,
    )


def periodic_eval(cfg: PolicyGradientConfig, agents: AgentRollouts | None = None) -> list[Node]:
    """Test-set evaluation every `eval_every` steps, from step 0, on pre-step weights."""
    if not cfg.evaluation.every:
        return []
    return [When(Every(cfg.evaluation.every, "step", offset=0), [evaluate(cfg, agents=agents)])]


def agent_rollouts(cfg: RLConfig, base_model: str) -> AgentRollouts | None:
    """How agent groups of a run of `base_model` roll out (an AgentRLConfig's budgets), or None:
    classic envs only."""
    if not isinstance(cfg, AgentRLConfig):
        return None
    from train_core.agents.rollouts import AgentBudgets

    budgets = AgentBudgets(
        wall_time_s=cfg.agents.wall_time_s,
        max_turns=cfg.agents.max_turns,
        max_sampled_tokens=cfg.agents.max_sampled_tokens,
        max_tool_calls=cfg.agents.max_tool_calls,
        min_group_size=cfg.agents.min_group_size,
    )
    over_http = cfg.agents.transport == "http"
    return AgentRollouts(budgets, cfg.agents.max_failed_fraction, over_http, base_model)


def fresh_sampler(agents: AgentRollouts | None = None) -> list[Node]:
    """A sampler on the current weights, which the agent gateway's `policy` then serves."""
    if agents is None:
        return [RefreshSampler()]
    return [RefreshSampler(), SetAgentPolicy(base_model=agents.base_model)]


def log_step(*, post_kl: bool) -> list[Node]:
    """After the update: the KL between pre- and post-update policy (optional), the metrics."""
    if post_kl:
        return [ComputePostKL(), LogRLStep()]
    return [LogRLStep()]


def save(cfg: RLLoopConfig) -> list[Node]:
    """A resumable checkpoint every `save_every` steps, and a rolling one every
    `rolling_save_every`."""
    rolling = rolling_checkpoints(cfg.checkpoint)
    if not cfg.checkpoint.save_every:
        return rolling
    return [When(Every(cfg.checkpoint.save_every, "step"), [SaveCheckpoint()]), *rolling]


def rollout_sampling(cfg: RLLoopConfig) -> RolloutSampling:
    """How training rollouts sample, in every mode."""
    return RolloutSampling(cfg.max_tokens, cfg.temperature, cfg.coalesce_samples, cfg.seed)


def sync_body(
    cfg: RLLoopConfig,
    train_nodes: list[Node],
    *,
    post_kl: bool,
    evaluation: list[Node],
    agents: AgentRollouts | None = None,
) -> list[Node]:
    """One sync iteration: fresh sampler, evaluation, roll out, train (from the advantages, which
    the transcripts show), log, save."""
    return [
        *fresh_sampler(agents),
        *evaluation,
        DoRollouts(sampling=rollout_sampling(cfg), agents=agents),
        *train_nodes,
        *log_step(post_kl=post_kl),
        *save(cfg),
    ]


def streaming_body(cfg: RLConfig, agents: AgentRollouts | None = None) -> list[Node]:
    recipe = MinibatchRecipe(
        estimator=cfg.advantage_estimator,
        remove_constant_reward_groups=cfg.remove_constant_reward_groups,
        kl_penalty_coef=cfg.kl.penalty_coef,
        kl_discount_factor=cfg.kl.discount_factor,
    )
    stream = StreamRolloutsAndTrain(
        sampling=rollout_sampling(cfg),
        learning_rate=cfg.optimizer.learning_rate,
        minibatch_size=cfg.stream_minibatch_size,
        recipe=recipe,
        loss_fn=cfg.loss_fn,
        loss_fn_config=cfg.loss_fn_config,
        lr_schedule=cfg.optimizer.schedule,
        agents=agents,
    )
    return [
        *fresh_sampler(agents),
        *periodic_eval(cfg, agents),
        stream,
        WriteRollouts(),
        *log_step(post_kl=cfg.kl.compute_post_kl),
        *save(cfg),
    ]


def async_body(cfg: RLConfig, agents: AgentRollouts | None = None) -> list[Node]:
    """The sampler is published by the previous step; rollouts never wait for this one."""
    return [
        *periodic_eval(cfg, agents),
        CollectGroups(groups_per_batch=cfg.groups_per_batch, agents=agents),
        *train(cfg, loss_fn_config=cfg.loss_fn_config),
        *log_step(post_kl=cfg.kl.compute_post_kl),
        PublishSampler(),
        *([SetAgentPolicy(base_model=agents.base_model)] if agents is not None else []),
        *save(cfg),
    ]


def as_sync_loop(cfg: RLLoopConfig) -> RLConfig:
    """rl_loop's options as the sync workflow's: group_mean, groups without signal skipped, one
    substep, no KL, no evaluation."""
    fields = cfg.model_dump(include=set(RLLoopConfig.model_fields))
    return RLConfig(**{**fields, "remove_constant_reward_groups": True, "eval_every": 0})


def reinforcement(
    cfg: RLConfig | RLLoopConfig, make_dataset: RLDatasetFactory, recipe: str = "reinforcement"
) -> Workflow[RLState]:
    """The RL workflow of `cfg.mode` over the env dataset `make_dataset` builds (an RLLoopConfig
    runs as rl_loop's minimal sync loop); the final model is registered as `recipe` (unless
    --no-register), with the config given. An AgentRLConfig's agent groups sample through the
    run's agent gateway (port "agents"), whose `policy` each fresh sampler becomes."""
    rl = cfg if isinstance(cfg, RLConfig) else as_sync_loop(cfg)
    start = start_point(rl, rl.checkpoint.load_path)
    agents = agent_rollouts(rl, start.model_name)
    nodes = setup(rl, make_dataset, start, reference_model=kl_reference(rl, start))
    finally_: list[Node] = []
    if rl.mode == "sync":
        train_nodes = train(rl, loss_fn_config=rl.loss_fn_config)
        evaluation = periodic_eval(rl, agents)
        body = sync_body(
            rl, train_nodes, post_kl=rl.kl.compute_post_kl, evaluation=evaluation, agents=agents
        )
    elif rl.mode == "streaming":
        body = streaming_body(rl, agents)
    else:
        body = async_body(rl, agents)
        nodes.append(
            StartRolloutPool(
                groups_per_batch=rl.groups_per_batch,
                max_steps_off_policy=rl.max_steps_off_policy,
                sampling=rollout_sampling(rl),
                agents=agents,
            )
        )
        if agents is not None:
            nodes.append(SetAgentPolicy(base_model=agents.base_model))
        finally_.append(StopRolloutPool())
    nodes.append(Loop("iteration", "n_batches", "batch_idx", steps=True, body=body))
    if rl.evaluation.every:
        nodes += [*fresh_sampler(agents), evaluate(rl, report=True, agents=agents)]
    nodes += [SaveFinal(), *registration_nodes(cfg, recipe, start)]
    return Workflow(f"reinforcement_{rl.mode}", RLState, nodes=nodes, finally_=finally_)
