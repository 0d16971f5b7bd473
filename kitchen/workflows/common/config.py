"""Config fields every training recipe shares. Each recipe's Config subclasses TrainConfig and
adds its own fields, each with a description and validation (`extra="forbid"`)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class TrainConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True, protected_namespaces=())

    model_name: str = Field(
        "kitchen/tiny-llama",
        description="Base model: a local dir, a HF name, smollm2-135m, kitchen/tiny-*",
    )
    backend: str = Field("local", description="Training backend: local | tinker | fake")
    base_url: str | None = Field(None, description="Tinker-compatible service URL (tinker backend)")
    log_path: str | None = Field(None, description="Run directory; default runs/<recipe>")
    seed: int = Field(0, description="Seed for data order, LoRA init and sampling")
    lora_rank: int = Field(
        32, ge=0, description="LoRA rank; 0 = full fine-tuning (local engine only)"
    )
    learning_rate: float = Field(1e-4, gt=0, description="Adam learning rate")
    lr_schedule: Literal["constant", "linear", "cosine"] = Field(
        "linear", description="LR schedule over the run"
    )
    save_every: int = Field(
        20, ge=0, description="Save a resumable checkpoint every N steps (0 = never)"
    )
    eval_every: int = Field(
        10, ge=0, description="Evaluate every N steps, on pre-step weights (0 = never)"
    )
    base_model: str | None = Field(
        None, description="registry:NAME[:VERSION]: start from a registered model's weights"
    )
    no_register: bool = Field(
        False, description="Skip registering the final model in the model registry"
    )
    registry: str | None = Field(
        None,
        description="Registry: a SQLite path or mlflow:URI (default $KITCHEN_REGISTRY or the user data dir)",
    )
    registry_name: str | None = Field(
        None, description="Name to register the model under (default: the recipe name)"
    )
    wandb_project: str | None = Field(
        None, description="Also log metrics to this Weights & Biases project"
    )
    wandb_name: str | None = Field(None, description="W&B run name")
