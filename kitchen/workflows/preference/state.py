from __future__ import annotations

from typing import Any

from pydantic import Field

from kitchen.engine.state import Handle, PendingQueue
from kitchen.workflows.common.state import TrainState


class PreferenceState(TrainState):
    """Preference learning (DPO): comparisons -> interleaved (chosen, rejected) datum pairs ->
    reference logprobs per batch -> pipelined DPO steps."""

    training_client: Handle[Any]
    reference_client: Handle[Any]
    tokenizer: Handle[Any]
    renderer: Handle[Any]
    comparisons: list[dict[str, Any]] | None = Field(
        None, description="Comparison rows: prompt_conversation, completion_A/B, label"
    )
    test_comparisons: list[dict[str, Any]] | None = None
    train_data: list[Any] | None = Field(
        None, description="Datums [chosen_0, rejected_0, chosen_1, ...]: pair i is 2i, 2i+1"
    )
    test_data: list[Any] | None = None
    test_reference_logprobs: list[Any] | None = Field(
        None, description="The frozen reference's per-target logprobs of test_data (computed once)"
    )
    n_pairs: int | None = None
    n_batches: int | None = Field(None, description="Batches per epoch")
    total_steps: int | None = None
    epoch_idx: int = 0
    batch_idx: int = 0
    order: list[int] | None = Field(None, description="This epoch's permutation of pair indices")
    batch: list[Any] | None = Field(None, description="Interleaved datums of this step's pairs")
    reference_logprobs: list[Any] | None = Field(
        None, description="The reference's per-target logprobs of `batch`, datum by datum"
    )
    dpo_metrics: dict[str, float] = Field(
        default_factory=dict,
        description="The last step's loss, accuracy, margin, chosen_reward, rejected_reward",
    )
    eval_metrics: dict[str, float] = Field(
        default_factory=dict, description="Pre-step evaluation of the current step"
    )
    step_queue: PendingQueue[Any]
    step_result: Any = Field(
        None, description="The last awaited SubmittedStep (common/train_step.py)"
    )
