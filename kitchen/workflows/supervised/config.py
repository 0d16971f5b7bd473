"""Config of supervised fine-tuning: every field with its description and validation."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field

from kitchen.workflows.common.config import EpochTrainConfig

TrainOnWhatName = Literal[
    "last_assistant_message",
    "last_assistant_turn",
    "all_assistant_messages",
    "all_messages",
    "all_tokens",
    "all_user_and_system_messages",
]


class SupervisedConfig(EpochTrainConfig):
    defaults: ClassVar[dict[str, Any]] = {"test_dataset": "bundled:chat"}

    train_on_what: TrainOnWhatName = Field(
        "all_assistant_messages", description="Which tokens carry loss"
    )
    eval_labels: bool = Field(
        False,
        description="Also score greedy answers by exact match (accuracy, macro P/R/F1) at the end",
    )
    num_samples_to_show: int = Field(
        3, ge=0, description="Held-out prompts answered before and after training"
    )
    sample_max_tokens: int = Field(48, gt=0, description="Max tokens per shown sample")
