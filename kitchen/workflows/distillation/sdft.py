"""SDFT, as tinker-cookbook 0.6.1's distillation/sdft.py (by default topk > 0, reverse off: the
forward KL over the teacher's top K; `reverse` and topk = 0 pick the other rows of train_core's
SDFT_OBJECTIVES): each iteration the student answers its batch of questions with its current
weights; the frozen base model, shown each question with its golden answer as a demonstration,
reads the student's answer (`topk_prompt_logprobs`), and the student takes a cross_entropy step
towards the teacher's renormalized top-K distribution at each of its answer tokens. The rewards
are all 0. With `teacher_sync_every` N, the teacher takes the student's weights every N steps.
Held out: `test/teacher_ce` on the test demonstrations' golden answers."""

from __future__ import annotations

from collections.abc import Sequence

from kitchen.engine.graph import Every, Loop, Node, When, Workflow
from kitchen.workflows.common.checkpoint import SaveFinal
from kitchen.workflows.common.evaluate import Evaluate, Scheduled
from kitchen.workflows.common.parts import optional
from kitchen.workflows.common.start import registration_nodes, start_point
from kitchen.workflows.distillation.config import SDFTWorkflowConfig
from kitchen.workflows.distillation.soft_targets import (
    LogSDFTStep,
    SDFTHeldOut,
    SDFTTargets,
    SoftTargetStep,
)
from kitchen.workflows.distillation.stages import InitTeachers, SyncTeacher
from kitchen.workflows.distillation.state import SDFTState
from kitchen.workflows.distillation.workflow import student_renderer_name
from kitchen.workflows.reinforcement.rollout import DoRollouts, WriteRollouts
from kitchen.workflows.reinforcement.stages import ComputeAdvantages, RefreshSampler
from kitchen.workflows.reinforcement.workflow import rollout_sampling, save, setup
from train_core.distillation.sdft_objectives import sdft_objective
from train_core.distillation.soft_ce import SoftCrossEntropyEvaluator
from train_core.distillation.teacher import TeacherSpec
from train_core.rl.types import RLDatasetFactory

# The held-out teacher-student cross-entropy's K when training uses none (topk = 0): the
# cookbook's default K, so the measure stays comparable across objectives.
HELD_OUT_TOPK = 20


def inline_eval(s: Scheduled) -> Evaluate:
    """A scheduled evaluator's in-loop stage, on the sampler the step's rollouts use (the
    weights the step starts from); its metrics are the step's own (into=None)."""
    return Evaluate(evaluator=s.evaluator, name=s.stage_name, into=None, sampler="sampling_client")


def sdft(
    cfg: SDFTWorkflowConfig,
    make_dataset: RLDatasetFactory,
    recipe: str = "sdft",
    inline: Sequence[Scheduled] = (),
    prepare: Sequence[Node] = (),
) -> Workflow[SDFTState]:
    """`make_dataset` builds the question envs; each group builder carries `question` and
    `golden_answer` (the demonstration the teacher sees). `inline`: evaluators at their own
    cadence (before steps 0, every, ...; and at the end), on the weights the step starts from;
    `prepare`: stages run once before the loop that they need (e.g. loading their problems)."""
    start = start_point(cfg, cfg.checkpoint.load_path)
    objective = sdft_objective(cfg.topk, cfg.reverse)
    targets = SDFTTargets(
        topk=cfg.topk,
        objective=objective,
        skip_first_n_tokens=cfg.skip_first_n_tokens,
        max_context_length=cfg.max_context_length,
        system_prompt=cfg.teacher_system_prompt,
        demo_template=cfg.demo_template,
    )
    held_out = Evaluate(evaluator=SoftCrossEntropyEvaluator(), into=None)
    evaluate, sync = bool(cfg.evaluation.every), bool(cfg.teacher_sync_every)
    body = [
        RefreshSampler(),
        *optional(evaluate, When(Every.before_step(cfg.evaluation.every), [held_out])),
        *(When(Every.before_step(s.every), [inline_eval(s)]) for s in inline if s.every > 0),
        DoRollouts(sampling=rollout_sampling(cfg)),
        ComputeAdvantages(estimator="group_mean"),
        WriteRollouts(),
        targets,
        SoftTargetStep(
            learning_rate=cfg.optimizer.learning_rate,
            num_substeps=cfg.num_substeps,
            lr_schedule=cfg.optimizer.schedule,
            objective=objective,
        ),
        # after step i when (i + 1) % N == 0, as the cookbook's (a resumed run restarts from the
        # frozen base until the next sync, as the cookbook's does)
        *optional(sync, When(Every(cfg.teacher_sync_every, "step"), [SyncTeacher()])),
        LogSDFTStep(),
        *save(cfg),
    ]
    # the teacher is the base model, frozen (the student's LoRA adapters off), as the cookbook's
    teacher = TeacherSpec(start.model_name)
    renderer = student_renderer_name(cfg, start.model_name)
    return Workflow(
        "sdft",
        SDFTState,
        nodes=[
            *setup(cfg, make_dataset, start),
            InitTeachers(specs=(teacher,), student_renderer=renderer),
            SDFTHeldOut(sdft=targets, topk=cfg.topk or HELD_OUT_TOPK),
            *prepare,
            Loop("iteration", "n_batches", "batch_idx", steps=True, body=body),
            *optional(evaluate, Evaluate(evaluator=SoftCrossEntropyEvaluator(), report=True)),
            *(
                Evaluate(evaluator=s.evaluator, name=s.stage_name, report=True)
                for s in inline
                if s.at_end
            ),
            SaveFinal(),
            *registration_nodes(cfg, recipe, start),
        ],
    )
