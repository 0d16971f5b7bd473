"""prompt_distillation: a teacher answers prompts under a long system prompt, and the student is
fine-tuned to give those answers without it (tinker-cookbook's recipes/prompt_distillation:
create_data.py then train.py, here one workflow).

Locally: SmolLM2-135M-Instruct, as teacher under the bundled "Pip" system prompt (nine rules:
Celsius first, metric units, "Happy cooking!") labels the bundled cooking questions; the same
model as student learns to follow the rules unprompted. test/nll is the NLL of the teacher's
held-out answers without the system prompt: before (step 0) and after training.
`--preset cookbook`: Qwen3.6-35B-A3B as teacher and student through Tinker.
"""

from __future__ import annotations

from typing import Any, ClassVar

from cookbook.datasets.catalog import prompt_of
from cookbook.recipes import SMOLLM2
from cookbook.recipes.on_policy_distillation import TeacherFields
from kitchen.engine.graph import Workflow
from kitchen.engine.recipe import Recipe
from kitchen.workflows.distillation import PromptDistillationWorkflowConfig, prompt_distillation
from kitchen.workflows.distillation.state import PromptDistillationState


class PromptDistillationConfig(PromptDistillationWorkflowConfig, TeacherFields):
    """The recipe's config: the workflow's fields, the teacher's, and the local defaults."""

    defaults: ClassVar[dict[str, Any]] = {
        "model_name": SMOLLM2,
        "teacher_max_tokens": 64,
        "num_epochs": 2,
        "learning_rate": 3e-4,
        "max_length": 512,
        "eval_every": 5,
    }


class PromptDistillation(Recipe[PromptDistillationConfig]):
    """Prompt distillation: teacher-labelled data under a system prompt, then SFT without it."""

    name = "prompt_distillation"

    def workflow(self, cfg: PromptDistillationConfig) -> Workflow[PromptDistillationState]:
        return prompt_distillation(cfg, cfg.teacher(), prompt_of, self.name)
