from __future__ import annotations

from typing import Any

from pydantic import Field

from kitchen.engine.state import Handle, PendingQueue
from kitchen.workflows.common.state import TrainState


class SupervisedState(TrainState):
    """Supervised fine-tuning: conversations -> datums -> pipelined train steps."""

    training_client: Handle[Any]
    tokenizer: Handle[Any]
    renderer: Handle[Any]
    conversations: list[dict[str, Any]] | None = Field(
        None, description='Rows with a "messages" list'
    )
    test_conversations: list[dict[str, Any]] | None = None
    train_data: list[Any] | None = None
    test_data: list[Any] | None = None
    n_batches: int | None = Field(None, description="Batches per epoch")
    total_steps: int | None = None
    epoch_idx: int = 0
    batch_idx: int = 0
    order: list[int] | None = Field(None, description="This epoch's permutation of train_data")
    batch: list[Any] | None = None
    eval_metrics: dict[str, float] = Field(
        default_factory=dict, description="Pre-step evaluation of the current step"
    )
    step_queue: PendingQueue[Any]
    step_result: Any = Field(
        None, description="The last awaited SubmittedStep (common/train_step.py)"
    )
    samples_before: list[dict[str, str]] | None = None
    samples_after: list[dict[str, str]] | None = None
