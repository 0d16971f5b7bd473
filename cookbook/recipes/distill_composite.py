"""distill_composite: on-policy distillation from N teachers, each scoring the samples of its own
prompt dataset, mixed per batch (tinker-cookbook's recipes/distillation/on_policy_multi_teacher).
Sources 0 and 1 are the math_* and chat_* fields; `extra_sources` adds sources 2, 3, ...

Locally: SmolLM2-135M-Instruct on the bundled cooking questions (teacher: SmolLM2 under the "Pip"
system prompt) and the bundled math questions (teacher: SmolLM2 as a step-by-step tutor).
`--preset cookbook`: Qwen3.5-9B on DeepMath (teacher Qwen3.6-27B) and Tulu3 (Qwen3.5-397B-A17B).
Metrics: teacher_kl, and teacher_kl/dataset_0 (math), teacher_kl/dataset_1 (chat), one more
per extra source.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from cookbook.envs.prompt_env import PromptSource, prompt_datasets, resolve_system_prompt
from cookbook.recipes import SMOLLM2
from kitchen.engine.graph import Workflow
from kitchen.engine.recipe import Recipe
from kitchen.workflows.distillation import DistillationConfig, TeacherSpec, on_policy_distillation
from kitchen.workflows.distillation.state import DistillationState

TUTOR = "You are a patient math tutor. Work through the problem step by step, then finish with: The answer is N."  # fmt: skip


class DistillSource(BaseModel):
    """One more prompt dataset and the teacher that scores the student's samples of it."""

    model_config = ConfigDict(extra="forbid")

    dataset: str = Field(description="Prompts: deepmath | tulu3 | bundled:NAME | a JSONL")
    groups_per_batch: int = Field(ge=0, description="Its prompts per batch")
    teacher_model: str = Field(SMOLLM2, description="Its teacher (the student's tokenizer)")
    teacher_checkpoint: str | None = Field(
        None, description="Teacher weights: a saved sampler path (None = base model)"
    )
    teacher_system_prompt: str | None = Field(
        None, description="The teacher's system prompt: bundled:NAME | a .txt path | text | None"
    )
    name: str = Field("", description="Its name in env/NAME/* metrics (default: the dataset's)")


class DistillCompositeConfig(DistillationConfig):
    # groups_per_batch is unused here: a batch is math_ + chat_groups_per_batch prompts.
    defaults: ClassVar[dict[str, Any]] = {
        "model_name": SMOLLM2,
        "group_size": 4,
        "num_batches": 10,
        "max_tokens": 48,
        "learning_rate": 3e-4,
    }
    math_dataset: str = Field(
        "bundled:math", description="dataset_0 prompts: deepmath | bundled:math | a JSONL"
    )
    math_teacher_model: str = Field(SMOLLM2, description="Teacher of dataset_0")
    math_teacher_checkpoint: str | None = Field(
        None, description="dataset_0 teacher weights: a saved sampler path (None = base model)"
    )
    math_teacher_system_prompt: str | None = Field(
        TUTOR, description="System prompt of the dataset_0 teacher (None = none)"
    )
    math_groups_per_batch: int = Field(2, ge=0, description="dataset_0 prompts per batch")
    chat_dataset: str = Field(
        "bundled:prompt_distill", description="dataset_1 prompts: tulu3 | bundled:NAME | a JSONL"
    )
    chat_teacher_model: str = Field(SMOLLM2, description="Teacher of dataset_1")
    chat_teacher_checkpoint: str | None = Field(
        None, description="dataset_1 teacher weights: a saved sampler path (None = base model)"
    )
    chat_teacher_system_prompt: str | None = Field(
        "bundled:prompt_distill",
        description="System prompt of the dataset_1 teacher: bundled:prompt_distill | a .txt path | text | None",
    )
    chat_groups_per_batch: int = Field(2, ge=0, description="dataset_1 prompts per batch")
    extra_sources: list[DistillSource] = Field(
        default_factory=list,
        description='Sources 2, 3, ... after math and chat, each with its own teacher: a JSON list of {"dataset", "groups_per_batch", "teacher_model", "teacher_checkpoint", "teacher_system_prompt", "name"}',
    )
    teacher_renderer_name: str | None = Field(
        None, description="Teachers' chat format; default: each teacher model's recommended one"
    )


def fixed_source(cfg: DistillCompositeConfig, prefix: str) -> DistillSource:
    """Source 0 or 1 as an extra source is given, so all sources are wired alike: each of its
    fields but the name is the config's `<prefix>_<field>` (prefix math or chat)."""
    fields = [f for f in DistillSource.model_fields if f != "name"]
    return DistillSource(name=prefix, **{f: getattr(cfg, f"{prefix}_{f}") for f in fields})


class DistillComposite(Recipe[DistillCompositeConfig]):
    """Multi-teacher on-policy distillation over N prompt datasets, a teacher each."""

    name = "distill_composite"

    def workflow(self, cfg: DistillCompositeConfig) -> Workflow[DistillationState]:
        given = [fixed_source(cfg, "math"), fixed_source(cfg, "chat"), *cfg.extra_sources]
        sources = [PromptSource(s.dataset, s.groups_per_batch, name=s.name) for s in given]
        teachers = [
            TeacherSpec(s.teacher_model, s.teacher_checkpoint, cfg.teacher_renderer_name,
                        resolve_system_prompt(s.teacher_system_prompt))
            for s in given
        ]  # fmt: skip
        make = prompt_datasets(sources, cfg.group_size, cfg.seed, cfg.max_prompt_tokens)
        return on_policy_distillation(cfg, make, teachers, self.name)
