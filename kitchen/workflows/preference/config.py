"""Config of preference learning (DPO): every field with its description and validation."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field

from kitchen.workflows.common.config import EpochTrainConfig


class PreferenceConfig(EpochTrainConfig):
    defaults: ClassVar[dict[str, Any]] = {
        "dataset": "bundled:prefs",
        "test_dataset": "bundled:prefs",
    }

    test_size: int | None = Field(
        1024, gt=0, description="Evaluate on at most this many held-out comparisons"
    )
    dpo_beta: float = Field(
        0.1, gt=0, description="DPO temperature: larger keeps the policy closer to the reference"
    )
    reference_model_name: str | None = Field(
        None,
        description="Reference model; default: the policy's initial weights (load_checkpoint_path)",
    )
    overflow: Literal["truncate", "drop"] = Field(
        "truncate",
        description="A pair longer than max_length: truncate its sides from the right, or drop it",
    )
