from __future__ import annotations

from typing import Any

from pydantic import Field

from kitchen.engine.state import Handle
from kitchen.workflows.common.state import EpochTrainState


class PreferenceState(EpochTrainState):
    """Preference learning (DPO): comparisons -> interleaved (chosen, rejected) datum pairs ->
    reference logprobs per batch -> pipelined DPO steps. train_data and each batch hold datums
    in train_core.preference.pairs' interleaved layout; `order` permutes pairs."""

    reference_client: Handle[Any]
    comparisons: list[dict[str, Any]] | None = Field(
        None, description="Comparison rows: prompt_conversation, completion_A/B, label"
    )
    test_comparisons: list[dict[str, Any]] | None = None
    test_reference_logprobs: list[Any] | None = Field(
        None, description="The frozen reference's per-target logprobs of test_data (computed once)"
    )
    n_pairs: int | None = None
    reference_logprobs: list[Any] | None = Field(
        None, description="The reference's per-target logprobs of `batch`, datum by datum"
    )
    dpo_metrics: dict[str, float] = Field(
        default_factory=dict,
        description="The last step's loss, accuracy, margin, chosen_reward, rejected_reward",
    )
