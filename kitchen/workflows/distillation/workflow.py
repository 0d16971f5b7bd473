"""Distillation workflows, as tinker-cookbook 0.6.1's distillation/ and recipes/prompt_distillation:

- on-policy: each iteration the student samples with its current weights, each sample's teacher
  scores the sampled tokens (in the teacher's own chat format), the per-token reverse KL becomes
  the advantage, and the configured policy-gradient loss takes a step. Several prompt datasets,
  each with its own teacher, mix through a composite dataset (teacher i scores dataset i).
- prompt distillation: a teacher answers prompts under a long system prompt (create-data), then
  the student is fine-tuned on (prompt without the system prompt -> the teacher's answer) with the
  supervised workflow's own stages.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from kitchen.engine.graph import Every, Loop, When, Workflow
from kitchen.workflows.common.checkpoint import SaveCheckpoint, SaveFinal
from kitchen.workflows.common.setup import InitTrainingClient, LoadDataset
from kitchen.workflows.common.start import register, start_point
from kitchen.workflows.distillation.config import DistillationConfig, PromptDistillationConfig
from kitchen.workflows.distillation.stages import (
    AddTeacherKL,
    InitTeacher,
    InitTeachers,
    LabelWithTeacher,
    TeacherSpec,
)
from kitchen.workflows.distillation.state import DistillationState, PromptDistillationState
from kitchen.workflows.reinforcement import RLLoopConfig
from kitchen.workflows.reinforcement.rollout import DoRollouts, WriteRollouts
from kitchen.workflows.reinforcement.stages import (
    BuildRLDataset,
    ComputeAdvantages,
    LogRLStep,
    RefreshSampler,
)
from kitchen.workflows.reinforcement.train import ComputePostKL, TrainStep
from kitchen.workflows.supervised import SupervisedConfig, setup, supervised
from kitchen.workflows.supervised.stages import TokenizeConversations


def student_renderer_name(cfg: RLLoopConfig | SupervisedConfig, model_name: str) -> str:
    from train_core.renderers import get_recommended_renderer_name

    return cfg.renderer_name or get_recommended_renderer_name(model_name)


def on_policy_distillation(
    cfg: DistillationConfig,
    make_dataset: Any,
    teachers: Sequence[TeacherSpec],
    recipe: str = "on_policy_distillation",
) -> Workflow[DistillationState]:
    """`make_dataset` (an RLDatasetFactory) builds the prompt envs; their group builders'
    `dataset_idx` picks the teacher (`teachers[i]` scores dataset i)."""
    start = start_point(cfg, cfg.checkpoint.load_path)
    save = (
        [When(Every(cfg.checkpoint.save_every, "step"), [SaveCheckpoint()])]
        if cfg.checkpoint.save_every
        else []
    )
    return Workflow(
        "on_policy_distillation",
        DistillationState,
        steps=[
            InitTrainingClient(start.model_name, lora_rank=cfg.lora_rank, renderer_name=cfg.renderer_name,
                               seed=cfg.seed, load_checkpoint_path=start.load_checkpoint_path),
            BuildRLDataset(make_dataset, cfg.num_batches),
            InitTeachers(tuple(teachers), student_renderer_name(cfg, start.model_name)),
            Loop("iteration", "n_batches", "batch_idx", steps=True, body=[
                RefreshSampler(),
                DoRollouts(cfg.max_tokens, cfg.temperature, cfg.coalesce_samples),
                WriteRollouts(),
                ComputeAdvantages("group_mean"),
                AddTeacherKL(cfg.kl.penalty_coef, cfg.kl.discount_factor),
                TrainStep(cfg.optimizer.learning_rate, cfg.loss_fn, cfg.loss_fn_config, cfg.num_substeps, cfg.optimizer.schedule),
                *([ComputePostKL()] if cfg.kl.compute_post_kl else []),
                LogRLStep(),
                *save,
            ]),
            SaveFinal(),
            *register(cfg, recipe, start),
        ],
    )  # fmt: skip


def prompt_distillation(
    cfg: PromptDistillationConfig,
    teacher: TeacherSpec,
    convert: Callable[[dict[str, Any], str], Any],
    recipe: str = "prompt_distillation",
) -> Workflow[PromptDistillationState]:
    """`convert(row, where) -> prompt text`. The supervised workflow after its data setup: the
    conversations come from the teacher instead of the dataset."""
    start = start_point(cfg, cfg.checkpoint.load_path)
    label = [LabelWithTeacher("prompts", "conversations", cfg.teacher_max_tokens, cfg.teacher_temperature)]  # fmt: skip
    load = [LoadDataset(cfg.dataset, "prompts", convert=convert, limit=cfg.max_prompts, fingerprint=True)]  # fmt: skip
    if cfg.test_dataset:
        load.append(
            LoadDataset(cfg.test_dataset, "test_prompts", split=cfg.test_split, convert=convert)
        )
        label.append(
            LabelWithTeacher(
                "test_prompts",
                "test_conversations",
                cfg.teacher_max_tokens,
                cfg.teacher_temperature,
                file_name="teacher_data_test.jsonl",
            )
        )
    # supervised() starts with its data setup (training client, datasets, tokenize): keep the
    # training client, swap the dataset loads for create-data, keep the rest as it is.
    n_setup = len(setup(cfg, None, start))
    sl = supervised(cfg, None, recipe)
    init, tokenize = sl.steps[0], sl.steps[n_setup - 1]
    if not (isinstance(init, InitTrainingClient) and isinstance(tokenize, TokenizeConversations)):
        raise TypeError("prompt_distillation: supervised() no longer starts with its data setup")
    return Workflow(
        "prompt_distillation",
        PromptDistillationState,
        steps=[init, *load, InitTeacher(teacher), *label, tokenize, *sl.steps[n_setup:]],
    )
