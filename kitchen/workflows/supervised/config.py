"""Config of supervised fine-tuning: every field with its description and validation."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from kitchen.workflows.common.config import TrainConfig

TrainOnWhatName = Literal[
    "last_assistant_message",
    "last_assistant_turn",
    "all_assistant_messages",
    "all_messages",
    "all_tokens",
    "all_user_and_system_messages",
]


class SupervisedConfig(TrainConfig):
    dataset: str = Field(
        "bundled:chat",
        description="bundled:NAME | a local JSONL/parquet of {messages} | a hub name",
    )
    test_dataset: str | None = Field(
        "bundled:chat", description="Held-out conversations (None = no evaluation)"
    )
    test_split: str = Field("test", description="Split of test_dataset to evaluate on")
    renderer_name: str | None = Field(
        None, description="Chat format; default: the model's recommended renderer"
    )
    train_on_what: TrainOnWhatName = Field(
        "all_assistant_messages", description="Which tokens carry loss"
    )
    max_length: int | None = Field(1024, gt=0, description="Truncate examples to this many tokens")
    batch_size: int = Field(8, gt=0, description="Conversations per step")
    num_epochs: int = Field(1, gt=0, description="Passes over the dataset")
    warmup_steps: int = Field(0, ge=0, description="Linear LR warmup steps before the schedule")
    adam_beta1: float = Field(0.9, ge=0, lt=1, description="Adam beta1")
    adam_beta2: float = Field(0.95, ge=0, lt=1, description="Adam beta2")
    adam_eps: float = Field(1e-8, gt=0, description="Adam epsilon")
    weight_decay: float = Field(0.0, ge=0, description="AdamW weight decay")
    grad_clip_norm: float = Field(0.0, ge=0, description="Clip the global grad norm (0 = off)")
    load_checkpoint_path: str | None = Field(
        None, description="Start from these saved weights (fresh optimizer)"
    )
    eval_labels: bool = Field(
        False,
        description="Also score greedy answers by exact match (accuracy, macro P/R/F1) at the end",
    )
    num_samples_to_show: int = Field(
        3, ge=0, description="Held-out prompts answered before and after training"
    )
    sample_max_tokens: int = Field(48, gt=0, description="Max tokens per shown sample")
