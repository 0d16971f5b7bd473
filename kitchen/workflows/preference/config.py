"""Config of preference learning (DPO): every field with its description and validation."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from kitchen.workflows.common.config import TrainConfig


class PreferenceConfig(TrainConfig):
    dataset: str = Field(
        "bundled:prefs", description="Comparison rows: bundled:NAME | a local JSONL | a hub name"
    )
    dataset_split: str = Field("train", description='Split of dataset to train on ("train[1024:]")')
    test_dataset: str | None = Field(
        "bundled:prefs", description="Held-out comparisons (None = no evaluation)"
    )
    test_split: str = Field("test", description="Split of test_dataset to evaluate on")
    test_size: int | None = Field(
        1024, gt=0, description="Evaluate on at most this many held-out comparisons"
    )
    renderer_name: str | None = Field(
        None, description="Chat format; default: the model's recommended renderer"
    )
    dpo_beta: float = Field(
        0.1, gt=0, description="DPO temperature: larger keeps the policy closer to the reference"
    )
    reference_model_name: str | None = Field(
        None, description="Reference model; default: the policy's initial weights"
    )
    max_length: int | None = Field(
        1024, gt=0, description="Longest sequence (prompt + completion) in tokens"
    )
    overflow: Literal["truncate", "drop"] = Field(
        "truncate",
        description="A pair longer than max_length: truncate its sides from the right, or drop it",
    )
    batch_size: int = Field(8, gt=0, description="Comparison pairs per step")
    num_epochs: int = Field(1, gt=0, description="Passes over the dataset")
    warmup_steps: int = Field(0, ge=0, description="Linear LR warmup steps before the schedule")
    adam_beta1: float = Field(0.9, ge=0, lt=1, description="Adam beta1")
    adam_beta2: float = Field(0.95, ge=0, lt=1, description="Adam beta2")
    adam_eps: float = Field(1e-8, gt=0, description="Adam epsilon")
    weight_decay: float = Field(0.0, ge=0, description="AdamW weight decay")
    grad_clip_norm: float = Field(0.0, ge=0, description="Clip the global grad norm (0 = off)")
    load_checkpoint_path: str | None = Field(
        None, description="Start from these saved weights (fresh optimizer); also the reference"
    )
