from __future__ import annotations

from typing import Any

from pydantic import Field

from kitchen.engine.state import Handle
from kitchen.workflows.reinforcement.state import RLState
from kitchen.workflows.supervised.state import SupervisedState


class DistillationState(RLState):
    """On-policy distillation: the RL loop's state, plus the teachers that score the samples."""

    teachers: Handle[list[Any]]


class PromptDistillationState(SupervisedState):
    """Prompt distillation: a teacher labels prompts (create-data), then supervised fine-tuning."""

    teacher: Handle[Any]
    prompts: list[str] | None = Field(None, description="Prompts the teacher answers (train)")
    test_prompts: list[str] | None = Field(None, description="Held-out prompts (test)")


class OffPolicyDistillationState(SupervisedState):
    """Off-policy distillation: supervised fine-tuning on the teachers' top-K soft targets."""

    teachers: Handle[list[Any]]
    row_stream: Handle[Any]  # the streamed training rows (stream_dataset), a RowCursor
    composite: Handle[Any]  # several sources mixed per batch (a train_core CompositeDataset)
    batch_teachers: list[int] | None = Field(None, description="The teacher of each batch datum")


class SDFTState(DistillationState):
    """SDFT: the RL loop's state, the teacher (the frozen base), and the top-K datums."""

    soft_data: list[Any] | None = Field(None, description="This step's top-K soft-target datums")
    test_data: list[Any] | None = Field(None, description="Held-out demonstrations, soft targets")
    benchmarks: Handle[dict[str, Any]]  # inline benchmarks' problems and graders, by name
