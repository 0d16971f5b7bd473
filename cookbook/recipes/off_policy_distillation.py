"""off_policy_distillation: the student trains on fixed conversations against a teacher's top-K
next-token distribution at every position (tinker-cookbook's distillation/train_off_policy.py).

Locally: SmolLM2-135M-Instruct (LoRA) distilled from the same base model on the bundled Pip
conversations; test/teacher_ce, the held-out teacher-student cross-entropy, is measured before and
after. The teacher must share the student's tokenizer. `extra_sources` mixes more datasets into
each batch, each distilled from its own teacher (the cookbook's multi-teacher configuration).
`--preset cookbook`: train_off_policy's defaults (K=20, batch 64, LoRA rank 32) with Qwen3.5-9B-Base
distilled from Qwen3.5-9B on Tulu3 through Tinker.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field

from cookbook.datasets.catalog import converter_for
from cookbook.recipes import SMOLLM2
from cookbook.recipes.dataset_splits import DatasetBinding, row_converters
from kitchen.engine.graph import Workflow
from kitchen.engine.recipe import Recipe
from kitchen.workflows.distillation.config import OffPolicyDistillationWorkflowConfig
from kitchen.workflows.distillation.off_policy import off_policy_distillation
from kitchen.workflows.distillation.state import OffPolicyDistillationState
from train_core.distillation.teacher import TeacherSpec


class OffPolicyDistillationConfig(OffPolicyDistillationWorkflowConfig):
    """dataset: no_robots | tulu3 | bundled:NAME | path.jsonl | a hub name; test_dataset: auto |
    a name | None."""

    defaults: ClassVar[dict[str, Any]] = {
        "model_name": SMOLLM2,
        "dataset": "bundled:chat",
        "test_dataset": "auto",
        "learning_rate": 2e-4,
        "eval_every": 8,
    }
    teacher_model: str = Field(
        SMOLLM2, description="Teacher model (the student's tokenizer: its top-K ids are targets)"
    )
    teacher_checkpoint: str | None = Field(
        None, description="Teacher weights: a saved sampler path (None = the base teacher_model)"
    )


class OffPolicyDistillation(Recipe[OffPolicyDistillationConfig]):
    """Off-policy distillation: cross-entropy to a teacher's top-K targets on fixed data."""

    name = "off_policy_distillation"

    bind = DatasetBinding("chat")

    def workflow(self, cfg: OffPolicyDistillationConfig) -> Workflow[OffPolicyDistillationState]:
        teachers = [
            TeacherSpec(cfg.teacher_model, cfg.teacher_checkpoint),
            *(TeacherSpec(s.teacher_model, s.teacher_checkpoint) for s in cfg.extra_sources),
        ]
        extra = [converter_for(s.dataset, "chat") for s in cfg.extra_sources]
        convert = row_converters(cfg, "chat")[0]
        return off_policy_distillation(cfg, teachers, convert, self.name, extra)
