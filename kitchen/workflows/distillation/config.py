"""Config of on-policy and prompt distillation."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, model_validator

from kitchen.workflows.common.config import EvalConfig
from kitchen.workflows.reinforcement.config import RLLoopConfig, RLStepConfig
from kitchen.workflows.supervised import SupervisedConfig


class DistillationConfig(RLStepConfig):
    """On-policy distillation: the RL loop's batch shape and loss, plus the teacher KL."""

    # The teacher's reverse KL is the only signal: kl_penalty_coef weighs it.
    defaults: ClassVar[dict[str, Any]] = {"kl_penalty_coef": 1.0}

    max_prompt_tokens: int | None = Field(
        1024, gt=0, description="Truncate each prompt to this many tokens (None = never)"
    )

    @model_validator(mode="after")
    def _teacher_signal(self) -> DistillationConfig:
        if self.kl.penalty_coef <= 0:
            raise ValueError("kl_penalty_coef is the weight of the teacher's KL; it must be > 0")
        return self


class PromptDistillationWorkflowConfig(SupervisedConfig):
    """Prompt distillation: the teacher's create-data step, then supervised fine-tuning."""

    defaults: ClassVar[dict[str, Any]] = {
        "dataset": "bundled:prompt_distill",
        "test_dataset": "bundled:prompt_distill",
    }

    max_prompts: int | None = Field(
        None, ge=1, description="Label at most this many training prompts (None = all)"
    )
    teacher_max_tokens: int = Field(256, ge=1, description="Max tokens per teacher answer")
    teacher_temperature: float = Field(
        0.15, ge=0, description="Sampling temperature of the teacher's answers"
    )


class OffPolicySource(BaseModel):
    """One more supervised dataset, the teacher it is distilled from, and its mixing weight."""

    model_config = ConfigDict(extra="forbid")

    dataset: str = Field(description="Conversations: bundled:NAME | a JSONL | a hub chat dataset")
    teacher_model: str = Field(description="Its teacher (the student's tokenizer)")
    teacher_checkpoint: str | None = Field(
        None, description="Teacher weights: a saved sampler path (None = base model)"
    )
    weight: float = Field(1.0, gt=0, description="Its share of each batch, against dataset_weight")
    split: str = Field("train", description="Its split to train on")


class OffPolicyDistillationWorkflowConfig(SupervisedConfig):
    """Off-policy distillation: supervised data, each position's targets the teacher's top K."""

    extra_sources: list[OffPolicySource] = Field(
        default_factory=list,
        description='More datasets mixed into each batch, each with its own teacher: a JSON list of {"dataset", "teacher_model", "teacher_checkpoint", "weight", "split"}',
    )
    dataset_weight: float = Field(
        1.0, gt=0, description="With extra_sources: the share of `dataset` in each batch"
    )

    n_teacher_targets: int = Field(
        20, ge=1, description="K: the teacher's most likely tokens per position used as targets"
    )
    stream_dataset: bool = Field(
        False,
        description="Read the training rows as training reaches them (a hub dataset with "
        "streaming=True, a JSONL line by line) instead of loading them first; one epoch, "
        "stream order (or stream_shuffle_buffer's)",
    )
    max_prompts: int = Field(
        128 * 3000,
        ge=1,
        description="With stream_dataset: training rows to read (max_prompts // batch_size steps)",
    )
    stream_shuffle_buffer: int = Field(
        0,
        ge=0,
        description="With stream_dataset: shuffle the stream through a buffer of this many rows "
        "seeded by seed (tinker-cookbook's buffer_size: 128 * 3000 for OpenThoughts3); 0: "
        "stream order",
    )

    @model_validator(mode="after")
    def _one_pass_over_a_stream(self) -> OffPolicyDistillationWorkflowConfig:
        if self.stream_dataset and self.num_epochs != 1:
            raise ValueError("stream_dataset reads the stream once: num_epochs must be 1")
        if self.stream_dataset and self.extra_sources:
            raise ValueError("stream_dataset streams one dataset; extra_sources are loaded whole")
        return self


class SDFTWorkflowConfig(RLLoopConfig):
    """SDFT: the student samples, its frozen base with the demonstration scores every token."""

    topk: int = Field(
        20,
        ge=0,
        description="K: the teacher's most likely tokens per position; 0 = the per-token "
        "importance-sampling estimate (advantage: teacher logprob - student logprob)",
    )
    reverse: bool = Field(
        False,
        description="Train the reverse KL over the teacher's top K (a custom loss) instead of "
        "the forward KL (cross_entropy); needs topk > 0",
    )
    teacher_sync_every: int = Field(
        0,
        ge=0,
        description="Every N steps the teacher takes the student's current weights (after the "
        "step); 0 = never: the frozen base model teaches throughout",
    )
    skip_first_n_tokens: int = Field(
        3,
        ge=0,
        description="Completion tokens at the start left out of the loss (the reference's 3)",
    )
    max_context_length: int = Field(
        32768, ge=1, description="The teacher's context: longer completions are cut to fit"
    )
    num_substeps: int = Field(1, ge=1, description="Updates per step: the batch split in parts")
    evaluation: EvalConfig = Field(
        default_factory=lambda: EvalConfig.model_validate({}),
        description="When to score the held-out demonstrations (test/teacher_ce)",
    )
    teacher_system_prompt: str | None = Field(
        None, description="System prompt of the teacher's demonstration prompt (None = none)"
    )
    demo_template: str = Field(
        "",
        description="The teacher's user turn, with {question} and {golden_answer}; empty = the "
        "cookbook's DEFAULT_DEMO_TEMPLATE",
    )

    @model_validator(mode="after")
    def _reverse_over_a_top_k(self) -> SDFTWorkflowConfig:
        if self.reverse and self.topk == 0:
            raise ValueError("reverse=True needs topk > 0: the reverse KL runs over the top K")
        return self
