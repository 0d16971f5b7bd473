"""Config of on-policy and prompt distillation."""

from __future__ import annotations

from pydantic import Field

from kitchen.workflows.reinforcement import RLLoopConfig
from kitchen.workflows.supervised import SupervisedConfig


class DistillationConfig(RLLoopConfig):
    """On-policy distillation: the RL loop's batch shape and loss, plus the teacher KL."""

    kl_penalty_coef: float = Field(
        1.0, gt=0, description="Weight of the teacher's reverse KL in the advantage"
    )
    kl_discount_factor: float = Field(
        0.0, ge=0, lt=1, description="Discount the KL over future tokens (0 = per token)"
    )
    num_substeps: int = Field(1, ge=1, description="Optimizer steps per iteration")
    compute_post_kl: bool = Field(
        False, description="Also log KL between pre- and post-update policy (extra scoring pass)"
    )
    max_prompt_tokens: int | None = Field(
        1024, gt=0, description="Truncate each prompt to this many tokens (None = never)"
    )
    load_checkpoint_path: str | None = Field(
        None, description="Start the student from these saved weights (fresh optimizer)"
    )


class PromptDistillationConfig(SupervisedConfig):
    """Prompt distillation: the teacher's create-data step, then supervised fine-tuning."""

    dataset: str = Field(
        "bundled:prompt_distill",
        description='Prompts the teacher answers: bundled:NAME | a JSONL of {"prompt"} | a hub name',
    )
    test_dataset: str | None = Field(
        "bundled:prompt_distill",
        description="Held-out prompts, also teacher-labelled: test NLL without the system prompt",
    )
    max_prompts: int | None = Field(
        None, ge=1, description="Label at most this many training prompts (None = all)"
    )
    teacher_max_tokens: int = Field(256, ge=1, description="Max tokens per teacher answer")
    teacher_temperature: float = Field(
        0.15, ge=0, description="Sampling temperature of the teacher's answers"
    )
