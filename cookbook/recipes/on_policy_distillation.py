"""on_policy_distillation: the student learns from a teacher's per-token reverse KL on its own
samples (tinker-cookbook's recipes/distillation/on_policy_distillation).

Locally: SmolLM2-135M-Instruct learns to answer the bundled cooking questions as the same model
does under the long "Pip" system prompt, without seeing that prompt (teacher_kl falls in minutes).
`--preset cookbook`: Qwen3.5-9B-Base distilled from Qwen3.5-9B on DeepMath through Tinker.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, Field

from cookbook.envs.prompt_env import PromptSource, prompt_datasets, resolve_system_prompt
from cookbook.recipes import SMOLLM2
from kitchen.engine.graph import Workflow
from kitchen.engine.recipe import Recipe
from kitchen.workflows.distillation import DistillationConfig, TeacherSpec, on_policy_distillation
from kitchen.workflows.distillation.state import DistillationState


class TeacherFields(BaseModel):
    """The one teacher of a distillation recipe (mixed into its config)."""

    teacher_model: str = Field(
        SMOLLM2, description="Teacher model (on-policy distillation: the student's tokenizer)"
    )
    teacher_checkpoint: str | None = Field(
        None, description="Teacher weights: a saved sampler path (None = the base teacher_model)"
    )
    teacher_renderer_name: str | None = Field(
        None, description="Teacher's chat format; default: the teacher model's recommended one"
    )
    teacher_system_prompt: str | None = Field(
        "bundled:prompt_distill",
        description="System prompt the teacher answers under: bundled:prompt_distill | a .txt path | text | None",
    )

    def teacher(self) -> TeacherSpec:
        return TeacherSpec(
            self.teacher_model,
            self.teacher_checkpoint,
            self.teacher_renderer_name,
            resolve_system_prompt(self.teacher_system_prompt),
        )


class OnPolicyDistillationConfig(DistillationConfig, TeacherFields):
    defaults: ClassVar[dict[str, Any]] = {
        "model_name": SMOLLM2,
        "group_size": 4,
        "groups_per_batch": 4,
        "num_batches": 10,
        "max_tokens": 48,
        "learning_rate": 3e-4,
    }
    dataset: str = Field(
        "bundled:prompt_distill",
        description="Prompts: deepmath | tulu3 | bundled:NAME | a JSONL of {prompt|question|messages}",
    )


class OnPolicyDistillation(Recipe[OnPolicyDistillationConfig]):
    """On-policy distillation: reverse KL to a teacher on the student's own samples."""

    name = "on_policy_distillation"

    def workflow(self, cfg: OnPolicyDistillationConfig) -> Workflow[DistillationState]:
        source = PromptSource(cfg.dataset, cfg.groups_per_batch)
        make = prompt_datasets([source], cfg.group_size, cfg.seed, cfg.max_prompt_tokens)
        return on_policy_distillation(cfg, make, [cfg.teacher()], self.name)
