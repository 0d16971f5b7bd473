"""Distillation stages: teachers, the teacher's reverse-KL advantages on the student's samples, and
teacher-labelled data for prompt distillation. Re-rendering for a teacher's chat format, token
alignment and the KL math are in train_core.distillation."""

from __future__ import annotations

import dataclasses
import json
import zlib
from dataclasses import dataclass
from typing import Any, ClassVar

from kitchen.engine.errors import ConfigError, StageError
from kitchen.engine.stage import Context, Metrics, SourceToInto
from kitchen.workflows.common.seeding import TEACHER_STREAM, SeededSampler
from train_core.distillation.teacher import Teacher, TeacherSpec, same_tokenizer


def open_teacher(backend: Any, spec: TeacherSpec, student_renderer: str | None) -> Teacher:
    from train_core.renderers import get_renderer, resolve_renderer_name

    if spec.checkpoint:
        client = backend.create_sampling_client(model_path=spec.checkpoint)
    else:
        client = backend.create_sampling_client(base_model=spec.model)
    tokenizer = client.get_tokenizer()
    renderer_name = resolve_renderer_name(spec.model, spec.renderer_name)
    same = renderer_name == student_renderer and not spec.system_prompt
    return Teacher(spec, client, tokenizer, get_renderer(renderer_name, tokenizer), same)


@dataclass(frozen=True, kw_only=True)
class InitTeachers:
    """One sampler per teacher (teacher i scores dataset i); each must share the student's tokenizer."""

    specs: tuple[TeacherSpec, ...]
    student_renderer: str
    name: str = "init_teachers"
    reads: frozenset[str] = frozenset({"tokenizer", "renderer"})
    writes: frozenset[str] = frozenset({"teachers"})
    ports: frozenset[str] = frozenset({"backend"})

    def __call__(self, ctx: Context[Any]) -> Metrics | None:
        backend = ctx.require_backend()
        # The student's renderer as the run settled it (a checkpoint's may replace the plan's).
        student = getattr(ctx.state.renderer, "_renderer_name", None) or self.student_renderer
        teachers = [open_teacher(backend, s, student) for s in self.specs]
        for i, teacher in enumerate(teachers):
            if not same_tokenizer(teacher.tokenizer, ctx.state.tokenizer):
                raise ConfigError(
                    f"teacher {i} ({teacher.spec.model}) has a different tokenizer from the "
                    "student; on-policy distillation scores the student's own token ids, so "
                    "pick a teacher of the same model family"
                )
        ctx.state.teachers = teachers
        return None


@dataclass(frozen=True, kw_only=True)
class SyncTeacher:
    """Teacher `teacher` takes the student's weights as they are now (a sampler on them), its
    tokenizer and chat format unchanged: SDFT's periodic hard sync of the self-teacher."""

    teacher: int = 0
    name: str = "sync_teacher"
    reads: frozenset[str] = frozenset({"training_client", "teachers"})
    writes: frozenset[str] = frozenset({"teachers"})

    def __call__(self, ctx: Context[Any]) -> Metrics | None:
        teachers = list(ctx.state.teachers)
        client = ctx.state.training_client.save_weights_and_get_sampling_client()
        teachers[self.teacher] = dataclasses.replace(teachers[self.teacher], client=client)
        ctx.state.teachers = teachers
        return {"sdft/teacher_synced_at_step": float(ctx.state.step)}


# What a stage that reads this step's rollouts against the teachers takes from the RL state.
TEACHER_STEP_READS = frozenset(
    {"trajectory_groups", "advantages", "env_group_builders", "teachers", "renderer", "tokenizer"}
)


@dataclass(frozen=True, kw_only=True)
class AddTeacherKL:
    """Datums from this step's groups, each with -coef * (log p_student - log p_teacher) added to
    its advantages; teacher_kl overall and per dataset (`teacher_kl/dataset_{i}`)."""

    coef: float = 1.0
    discount: float = 0.0
    name: str = "add_teacher_kl"
    phase: ClassVar[str] = "reference"  # the teacher is the reverse KL's reference
    reads: frozenset[str] = TEACHER_STEP_READS
    writes: frozenset[str] = frozenset({"train_data"})

    async def __call__(self, ctx: Context[Any]) -> Metrics | None:
        from train_core.distillation import apply_teacher_kl, score_with_teachers
        from train_core.rl import assemble_training_data

        state = ctx.state
        groups_P, builders_P = state.trajectory_groups, state.env_group_builders
        data_D, meta_D = assemble_training_data(groups_P, state.advantages)
        teacher_lp_D, tags_D = await score_with_teachers(
            data_D, meta_D, groups_P, builders_P, state.teachers, state.renderer, state.tokenizer
        )
        state.train_data, metrics = apply_teacher_kl(
            data_D, teacher_lp_D, tags_D, self.coef, self.discount
        )
        return {**metrics, "num_datums": len(data_D)}


@dataclass(frozen=True, kw_only=True)
class InitTeacher:
    """The teacher of prompt distillation (any tokenizer: it only writes text)."""

    spec: TeacherSpec
    name: str = "init_teacher"
    reads: frozenset[str] = frozenset()
    writes: frozenset[str] = frozenset({"teacher"})
    ports: frozenset[str] = frozenset({"backend"})

    def __call__(self, ctx: Context[Any]) -> Metrics | None:
        ctx.state.teacher = open_teacher(ctx.require_backend(), self.spec, None)
        return None


@dataclass(frozen=True, kw_only=True)
class LabelWithTeacher(SourceToInto):
    """Create-data: the teacher's conversations for the prompts in `source`, into `into`
    (train_core.distillation.teacher_conversations). Written to `<log_dir>/<file_name>` too, and
    read back from there when it exists (a resumed run trains on the data it started with).
    Prompt i's answer is sampled with the i-th seed of the (seed, teacher, `into`) stream: the
    same data from the same seed."""

    source: str
    into: str
    max_tokens: int = 256
    temperature: float = 0.15
    seed: int = 0
    file_name: str = "teacher_data.jsonl"
    name: str = "label_with_teacher"
    needs: ClassVar[frozenset[str]] = frozenset({"teacher"})

    async def __call__(self, ctx: Context[Any]) -> Metrics | None:
        from train_core.distillation import teacher_conversations

        saved = ctx.log_dir / self.file_name if ctx.log_dir is not None else None
        if saved is not None and saved.exists():  # a resumed run trains on the same data
            rows = [json.loads(line) for line in saved.read_text().splitlines() if line.strip()]
            setattr(ctx.state, self.into, rows)
            ctx.logger.info("reusing %d teacher-labelled rows from %s", len(rows), saved)
            return None
        prompts: list[str] = getattr(ctx.state, self.source)
        teacher = ctx.state.teacher
        key = (self.seed, TEACHER_STREAM, zlib.crc32(self.into.encode()))
        seeded = SeededSampler(teacher.client, key)
        rows = await teacher_conversations(
            dataclasses.replace(teacher, client=seeded), prompts, self.max_tokens, self.temperature
        )
        if not rows:
            raise StageError(f"the teacher gave no non-empty answer to the {len(prompts)} prompts")
        setattr(ctx.state, self.into, rows)
        if saved is not None:
            with saved.open("w") as f:
                f.writelines(json.dumps(r) + "\n" for r in rows)
        ctx.logger.info("teacher labelled %d of %d prompts", len(rows), len(prompts))
        return {f"create_data/{self.into}": len(rows)}
