"""Distillation workflows, as tinker-cookbook 0.6.1's distillation/ and recipes/prompt_distillation:

- on-policy: each iteration the student samples with its current weights, each sample's teacher
  scores the sampled tokens (in the teacher's own chat format), the per-token reverse KL becomes
  the advantage, and the configured policy-gradient loss takes a step. Several prompt datasets,
  each with its own teacher, mix through a composite dataset (teacher i scores dataset i).
- prompt distillation: a teacher answers prompts under a long system prompt (create-data), then
  the student is fine-tuned on (prompt without the system prompt -> the teacher's answer) by the
  supervised workflow's training part.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from kitchen.engine.graph import Loop, Node, Workflow
from kitchen.workflows.common.checkpoint import SaveFinal
from kitchen.workflows.common.setup import LoadDataset
from kitchen.workflows.common.start import registration_nodes, start_point
from kitchen.workflows.distillation.config import (
    DistillationConfig,
    PromptDistillationWorkflowConfig,
)
from kitchen.workflows.distillation.stages import (
    AddTeacherKL,
    InitTeacher,
    InitTeachers,
    LabelWithTeacher,
)
from kitchen.workflows.distillation.state import DistillationState, PromptDistillationState
from kitchen.workflows.reinforcement import RLLoopConfig
from kitchen.workflows.reinforcement.rollout import WriteRollouts
from kitchen.workflows.reinforcement.stages import ComputeAdvantages
from kitchen.workflows.reinforcement.train import TrainStep
from kitchen.workflows.reinforcement.workflow import setup, sync_body
from kitchen.workflows.supervised import SupervisedConfig
from kitchen.workflows.supervised.workflow import supervised_parts
from train_core.distillation.teacher import TeacherSpec


def student_renderer_name(cfg: RLLoopConfig | SupervisedConfig, model_name: str) -> str:
    from train_core.renderers import resolve_renderer_name

    return resolve_renderer_name(model_name, cfg.renderer_name)


def on_policy_distillation(
    cfg: DistillationConfig,
    make_dataset: Any,
    teachers: Sequence[TeacherSpec],
    recipe: str = "on_policy_distillation",
) -> Workflow[DistillationState]:
    """`make_dataset` (an RLDatasetFactory) builds the prompt envs; their group builders'
    `dataset_idx` picks the teacher (`teachers[i]` scores dataset i)."""
    start = start_point(cfg, cfg.checkpoint.load_path)
    train = [
        ComputeAdvantages(estimator="group_mean"),
        WriteRollouts(),
        AddTeacherKL(coef=cfg.kl.penalty_coef, discount=cfg.kl.discount_factor),
        TrainStep(
            learning_rate=cfg.optimizer.learning_rate,
            loss_fn=cfg.loss_fn,
            loss_fn_config=cfg.loss_fn_config,
            num_substeps=cfg.num_substeps,
            lr_schedule=cfg.optimizer.schedule,
        ),
    ]
    body = sync_body(cfg, train, post_kl=cfg.kl.compute_post_kl, evaluation=[])
    renderer = student_renderer_name(cfg, start.model_name)
    return Workflow(
        "on_policy_distillation",
        DistillationState,
        nodes=[
            *setup(cfg, make_dataset, start),
            InitTeachers(specs=tuple(teachers), student_renderer=renderer),
            Loop("iteration", "n_batches", "batch_idx", steps=True, body=body),
            SaveFinal(),
            *registration_nodes(cfg, recipe, start),
        ],
    )


def teacher_data(
    cfg: PromptDistillationWorkflowConfig,
    teacher: TeacherSpec,
    convert: Callable[[dict[str, Any], str], Any],
) -> list[Node]:
    """Create-data: the prompts (train and held-out), the teacher, and its answers as the
    `conversations` / `test_conversations` the supervised workflow's `train` part tokenizes."""
    loads = [
        LoadDataset(
            cfg.dataset,
            "prompts",
            split=cfg.dataset_split,
            convert=convert,
            # both cap the training prompts: the smaller one set wins
            limit=min((n for n in (cfg.max_prompts, cfg.n_train_samples) if n), default=None),
            fingerprint=True,
        )
    ]
    # the teacher answers train and test prompts alike
    label = partial(
        LabelWithTeacher,
        max_tokens=cfg.teacher_max_tokens,
        temperature=cfg.teacher_temperature,
        seed=cfg.seed,
    )
    labels = [label(source="prompts", into="conversations")]
    if cfg.test_dataset:
        loads.append(
            LoadDataset(cfg.test_dataset, "test_prompts", split=cfg.test_split, convert=convert)
        )
        labels.append(
            label(
                source="test_prompts",
                into="test_conversations",
                file_name="teacher_data_test.jsonl",
            )
        )
    return [*loads, InitTeacher(spec=teacher), *labels]


def prompt_distillation(
    cfg: PromptDistillationWorkflowConfig,
    teacher: TeacherSpec,
    convert: Callable[[dict[str, Any], str], Any],
    recipe: str = "prompt_distillation",
) -> Workflow[PromptDistillationState]:
    """`convert(row, where) -> prompt text`. The supervised workflow whose conversations come
    from the teacher (the teacher-data part) instead of the dataset."""
    supervised = supervised_parts(cfg, recipe=recipe)
    return Workflow(
        "prompt_distillation",
        PromptDistillationState,
        nodes=[
            *supervised.client,
            *teacher_data(cfg, teacher, convert),
            *supervised.train,
            *supervised.finish,
        ],
    )
