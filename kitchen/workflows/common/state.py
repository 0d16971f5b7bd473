from __future__ import annotations

from typing import Any

from pydantic import Field

from kitchen.engine.state import BaseState, Handle, PendingQueue


class TrainState(BaseState):
    """What every training workflow returns to its caller, besides its own fields."""

    eval_results: dict[str, float] = Field(
        default_factory=dict, description="Final evaluation metrics"
    )
    registered_model: dict[str, Any] | None = Field(
        None, description="id, name, version of the registered model"
    )
    dataset_fingerprints: dict[str, str] = Field(
        default_factory=dict, description="source -> sha256 of its rows"
    )
    final_paths: dict[str, str] | None = Field(
        None, description="state_path and sampler_path of the final checkpoint"
    )


class EpochTrainState(TrainState):
    """What the epoch loop and the pipelined train step (common/batches.py, common/train_step.py)
    read and write, for the workflows that train in epochs over a fixed dataset (SFT, DPO)."""

    training_client: Handle[Any]
    tokenizer: Handle[Any]
    renderer: Handle[Any]
    train_data: list[Any] | None = None
    test_data: list[Any] | None = None
    n_batches: int | None = Field(None, description="Batches per epoch")
    total_steps: int | None = None
    epoch_idx: int = 0
    batch_idx: int = 0
    order: list[int] | None = Field(
        None, description="This epoch's permutation of the training units (examples or pairs)"
    )
    batch: list[Any] | None = None
    eval_metrics: dict[str, float] = Field(
        default_factory=dict, description="Pre-step evaluation of the current step"
    )
    step_queue: PendingQueue[Any]
    step_result: Any = Field(
        None, description="The last awaited SubmittedStep (common/train_step.py)"
    )
