from __future__ import annotations

from pydantic import Field

from kitchen.workflows.common.state import TrainState


class RLHFState(TrainState):
    """A run of sections: what each finished section handed on."""

    section_paths: dict[str, dict[str, str]] = Field(
        default_factory=dict,
        description="section -> state_path and sampler_path of its final checkpoint",
    )
