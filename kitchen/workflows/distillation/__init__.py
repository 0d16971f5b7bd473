"""Distillation: on-policy (the student samples, teachers score each token) and prompt
distillation (a teacher labels prompts, then supervised fine-tuning)."""

from kitchen.workflows.distillation.config import (
    DistillationConfig,
    PromptDistillationWorkflowConfig,
)
from kitchen.workflows.distillation.state import DistillationState, PromptDistillationState
from kitchen.workflows.distillation.workflow import (
    on_policy_distillation,
    prompt_distillation,
    student_renderer_name,
)
from train_core.distillation.teacher import TeacherSpec

__all__ = [
    "DistillationConfig",
    "DistillationState",
    "PromptDistillationState",
    "PromptDistillationWorkflowConfig",
    "TeacherSpec",
    "on_policy_distillation",
    "prompt_distillation",
    "student_renderer_name",
]
