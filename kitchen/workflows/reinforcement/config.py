"""Config of reinforcement learning (rl_loop's minimal loop and the moded workflow)."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from kitchen.workflows.common.config import ConfigGroup, EvalConfig, KLConfig, TrainConfig
from train_core.losses import CLIPPED_LOSSES, PolicyLoss

RLMode = Literal["sync", "streaming", "async"]


class RLLoopConfig(TrainConfig):
    """What every RL loop needs: the batch shape, sampling, and the loss."""

    defaults: ClassVar[dict[str, Any]] = {"lr_schedule": "constant"}  # tinker-cookbook RL

    group_size: int = Field(4, ge=1, description="Rollouts per problem (GRPO group)")
    groups_per_batch: int = Field(8, ge=1, description="Problems (groups) per training batch")
    num_batches: int | None = Field(
        None, ge=1, description="Training iterations; default: every batch of the env dataset"
    )
    max_tokens: int = Field(16, ge=1, description="Max sampled tokens per turn")
    temperature: float = Field(1.0, gt=0, description="Sampling temperature of rollouts")
    loss_fn: PolicyLoss = Field("importance_sampling", description="Policy-gradient loss")
    loss_fn_config: dict[str, float] | None = Field(
        None,
        description="Loss options, e.g. clip_low_threshold / clip_high_threshold (ppo, cispo), beta (dro)",
    )
    coalesce_samples: bool = Field(
        True, description="Sample a group's identical prompts in one call (num_samples=group_size)"
    )


class RLStepConfig(RLLoopConfig):
    """An RL loop whose step is split in substeps and carries a KL term (RL, distillation)."""

    num_substeps: int = Field(
        1,
        ge=1,
        description="Updates (optim_step calls) per step: the batch split in this many parts",
    )
    kl: KLConfig = Field(
        default_factory=lambda: KLConfig.model_validate({}),
        description="The KL term of the advantage",
    )


class RLKLConfig(KLConfig):
    reference_model: str | None = Field(
        None,
        alias="kl_reference_model",
        description="Reference model of the KL penalty; default: model_name (adapters off)",
    )


class RLEvalConfig(EvalConfig):
    temperature: float = Field(
        0.0,
        ge=0,
        alias="eval_temperature",
        description="Sampling temperature of test-set evaluation (0 = greedy)",
    )


class PolicyGradientConfig(RLStepConfig):
    """Rewards into advantages, a KL penalty to a reference, test-set evaluation (RL, code RL)."""

    advantage_estimator: str = Field(
        "group_mean",
        description="group_mean (reward minus the group mean) | gae (per-turn GAE, code RL) | any "
        "name in train_core.rl ADVANTAGE_ESTIMATORS",
    )
    remove_constant_reward_groups: bool = Field(
        False, description="Train only on groups whose rewards differ (the rest carry no signal)"
    )
    kl: RLKLConfig = Field(
        default_factory=lambda: RLKLConfig.model_validate({}),
        description="The KL penalty to a reference model",
    )
    evaluation: RLEvalConfig = Field(
        default_factory=lambda: RLEvalConfig.model_validate({}),
        description="When and how to evaluate on test problems",
    )

    @field_validator("advantage_estimator")
    @classmethod
    def _known_estimator(cls, name: str) -> str:
        import train_core.rl  # noqa: F401  (registers every built-in estimator)
        from train_core.rl.advantages import get_advantage_estimator

        get_advantage_estimator(name)  # raises listing the known names
        return name


class RLConfig(PolicyGradientConfig):
    """The full RL workflow: modes, substeps, KL penalty, evaluation."""

    mode: RLMode = Field(
        "sync", description="sync | streaming (train as groups finish) | async (off-policy)"
    )
    stream_minibatch_size: int = Field(
        2, ge=1, description="streaming: groups per forward_backward minibatch"
    )
    max_steps_off_policy: int = Field(
        1, ge=0, description="async: how many steps behind the learner a trained sample may be"
    )

    @model_validator(mode="after")
    def check_mode_options(self) -> RLConfig:
        if self.mode == "streaming" and self.num_substeps != 1:
            raise ValueError(
                "mode streaming takes one optim_step per iteration; set num_substeps 1"
            )
        if self.mode == "streaming" and self.stream_minibatch_size > self.groups_per_batch:
            raise ValueError(
                f"stream_minibatch_size {self.stream_minibatch_size} is above groups_per_batch "
                f"{self.groups_per_batch}"
            )
        return self


class AgentConfig(ConfigGroup):
    """Budgets and error tolerance of agent rollouts (an agent's own loop on an OpenAI client)."""

    wall_time_s: float | None = Field(
        120.0,
        gt=0,
        alias="agent_wall_time_s",
        description="Seconds one rollout may run before it is cancelled and dropped (None: no limit)",
    )
    max_turns: int | None = Field(
        None,
        ge=1,
        alias="agent_max_turns",
        description="Model calls one rollout may make; the call past it is refused and the "
        "rollout dropped (None: no limit)",
    )
    max_sampled_tokens: int | None = Field(
        None,
        ge=1,
        alias="agent_max_sampled_tokens",
        description="Tokens one rollout may sample over all its calls (each call's max_tokens "
        "is capped to what is left); a call with none left is refused and the rollout dropped "
        "(None: no limit)",
    )
    max_tool_calls: int | None = Field(
        None,
        ge=0,
        alias="agent_max_tool_calls",
        description="Tool calls one rollout's model may make (counted by the gateway on every "
        "route, streamed or not); the reply past it is refused and the rollout dropped "
        "(None: no limit)",
    )
    min_group_size: int = Field(
        2,
        ge=1,
        alias="agent_min_group_size",
        description="Rollouts a group must keep to train; a group with fewer left is dropped",
    )
    transport: Literal["in_process", "http"] = Field(
        "in_process",
        alias="agent_transport",
        description="How rollouts reach the gateway: in_process (an OpenAI client with no socket) "
        "| http (a client on its port: agent_gateway_port, or a free one)",
    )
    port: int | None = Field(
        None,
        ge=0,
        le=65535,
        alias="agent_gateway_port",
        description="Also serve the run's agent gateway over HTTP on this port (0: a free one), "
        "for agents in other processes; None: in-process clients only",
    )
    max_failed_fraction: float = Field(
        0.5,
        ge=0,
        le=1,
        alias="agent_max_failed_fraction",
        description="The step fails when more than this fraction of its rollouts were dropped "
        "(raised, timed out, over budget), naming the first",
    )


class AgentRLConfig(RLConfig):
    """The RL workflow over agent groups: the agent's calls go through the run's gateway."""

    agents: AgentConfig = Field(
        default_factory=lambda: AgentConfig.model_validate({}),
        description="Budgets and error tolerance of agent rollouts",
    )

    @model_validator(mode="after")
    def _groups_can_keep_enough(self) -> AgentRLConfig:
        if self.agents.min_group_size > self.group_size:
            raise ValueError(
                f"agent_min_group_size {self.agents.min_group_size} is above group_size "
                f"{self.group_size}: every group would be dropped"
            )
        return self


class CodeRLWorkflowConfig(PolicyGradientConfig):
    """The sync RL loop's options, the sandbox, and the PPO-style knobs."""

    ppo_epochs: int = Field(
        1,
        ge=1,
        description="Passes over each step's batch of rollouts (each pass: forward_backward + "
        "optim_step per substep on the same datums; the sampler's logprobs stay the old policy)",
    )
    clip_epsilon: float | None = Field(
        None,
        gt=0,
        lt=1,
        description="Clip the ratio of ppo, cispo or gspo to [1 - e, 1 + e] (sets "
        "clip_low/high_threshold); None: the loss's own defaults",
    )
    gamma: float = Field(1.0, ge=0, le=1, description="gae: discount per turn (1 = undiscounted)")
    gae_lambda: float = Field(
        1.0, ge=0, le=1, description="gae: lambda (1 = return minus baseline, 0 = one-step TD)"
    )
    sandbox: Literal["local", "http"] = Field(
        "local",
        description="Where programs run: local (bubblewrap jails here) | http (SandboxFusion at "
        "sandbox_url or $SANDBOX_URL)",
    )
    sandbox_url: str | None = Field(
        None, description="http sandbox: the SandboxFusion run_code URL (default $SANDBOX_URL)"
    )
    sandbox_max_concurrency: int | None = Field(
        None, ge=1, description="Programs run at once (default: local = CPU count)"
    )

    @model_validator(mode="after")
    def _knobs_apply(self) -> CodeRLWorkflowConfig:
        if self.advantage_estimator != "gae" and (self.gamma != 1.0 or self.gae_lambda != 1.0):
            raise ValueError(
                f"gamma and gae_lambda apply to the gae estimator; advantage_estimator is "
                f"{self.advantage_estimator!r} (set advantage_estimator gae)"
            )
        if self.clip_epsilon is not None:
            if self.loss_fn not in CLIPPED_LOSSES:
                raise ValueError(
                    f"clip_epsilon sets the clip thresholds of {', '.join(CLIPPED_LOSSES)}; "
                    f"loss_fn is {self.loss_fn!r} (set loss_fn ppo)"
                )
            clash = {"clip_low_threshold", "clip_high_threshold"} & set(self.loss_fn_config or {})
            if clash:
                raise ValueError(
                    f"clip_epsilon and loss_fn_config both set {', '.join(sorted(clash))}; keep one"
                )
        if self.sandbox_url is not None and self.sandbox != "http":
            raise ValueError("sandbox_url is only for sandbox http")
        return self

    def effective_loss_fn_config(self) -> dict[str, float] | None:
        """loss_fn_config with clip_epsilon's thresholds."""
        config = dict(self.loss_fn_config or {})
        if self.clip_epsilon is not None:
            config["clip_low_threshold"] = 1.0 - self.clip_epsilon
            config["clip_high_threshold"] = 1.0 + self.clip_epsilon
        return config or None
