from __future__ import annotations

from typing import Any

from pydantic import Field

from kitchen.workflows.common.state import EpochTrainState


class SupervisedState(EpochTrainState):
    """Supervised fine-tuning: conversations -> datums -> pipelined train steps."""

    conversations: list[dict[str, Any]] | None = Field(
        None, description='Rows with a "messages" list'
    )
    test_conversations: list[dict[str, Any]] | None = None
    # {"prompt", "reference", "answer"}, and "images": the prompt's pictures, by path
    samples_before: list[dict[str, Any]] | None = None
    samples_after: list[dict[str, Any]] | None = None
