from __future__ import annotations

from typing import Any

from pydantic import Field

from kitchen.engine.state import BaseState


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
