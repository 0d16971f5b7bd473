"""Off-policy distillation, as tinker-cookbook 0.6.1's distillation/train_off_policy.py: the
student trains on fixed conversations, and at every position the targets are the teacher's K most
likely next tokens, weighted by the teacher's probabilities renormalized over them (cross_entropy
on [N, K] targets: forward KL to the teacher's top K). No sampling from the student. The held-out
metric is the teacher-student cross-entropy of the test conversations' soft targets, computed
once from the teacher and then scored on the student before and after training.

The training rows are loaded first and shuffled per epoch, or with `stream_dataset` streamed
(off_policy_reasoning's OpenThoughts3 way: rows read as training reaches them, streamed.py)."""

from __future__ import annotations

from collections.abc import Sequence

from kitchen.engine.errors import ConfigError
from kitchen.engine.graph import Await, Every, Loop, Node, When, Workflow
from kitchen.workflows.common.batches import GetBatch, ShuffleEpoch
from kitchen.workflows.common.checkpoint import SaveCheckpoint, SaveFinal
from kitchen.workflows.common.evaluate import Evaluate
from kitchen.workflows.common.parts import optional
from kitchen.workflows.common.setup import LoadDataset, RowConverter
from kitchen.workflows.common.start import init_training_client, registration_nodes, start_point
from kitchen.workflows.common.train_step import LogTrainStep, submit_train_step
from kitchen.workflows.distillation.config import OffPolicyDistillationWorkflowConfig
from kitchen.workflows.distillation.soft_targets import (
    ComposeSources,
    CompositeBatch,
    SoftCrossEntropyLoss,
    TeacherTopKTargets,
)
from kitchen.workflows.distillation.stages import InitTeachers
from kitchen.workflows.distillation.state import OffPolicyDistillationState
from kitchen.workflows.distillation.streamed import OpenRowStream, StreamedBatch, TokenizeHeldOut
from kitchen.workflows.distillation.workflow import student_renderer_name
from kitchen.workflows.supervised.workflow import _data, _tokenize
from train_core.distillation.soft_ce import SoftCrossEntropyEvaluator
from train_core.distillation.teacher import TeacherSpec


def off_policy_distillation(
    cfg: OffPolicyDistillationWorkflowConfig,
    teachers: Sequence[TeacherSpec],
    convert: RowConverter | None = None,
    recipe: str = "off_policy_distillation",
    extra_converters: Sequence[RowConverter] = (),
) -> Workflow[OffPolicyDistillationState]:
    """`teachers[0]` distils `cfg.dataset`, `teachers[i]` the i-th of `cfg.extra_sources` (read
    with `extra_converters[i - 1]`); each must share the student's tokenizer: its top-K ids are
    the student's targets."""
    start = start_point(cfg, cfg.checkpoint.load_path)
    k, test = cfg.n_teacher_targets, bool(cfg.test_dataset)
    held_out = SoftCrossEntropyEvaluator()
    drain: list[Node] = [Await("step_queue", into="step_result"), LogTrainStep()]
    renderer = student_renderer_name(cfg, start.model_name)
    if cfg.stream_dataset:
        data, order, batch = _streamed(cfg, convert)
    elif cfg.extra_sources:
        data, order, batch = _composed(cfg, convert, extra_converters)
    else:
        data, order, batch = _loaded(cfg, convert)
    routed = bool(cfg.extra_sources)
    return Workflow(
        "off_policy_distillation",
        OffPolicyDistillationState,
        nodes=[
            init_training_client(cfg, start),
            InitTeachers(specs=tuple(teachers), student_renderer=renderer),
            *data,
            *optional(test, TeacherTopKTargets(field="test_data", topk=k)),
            Loop("epoch", cfg.num_epochs, "epoch_idx", [
                *order,
                Loop("batch", "n_batches", "batch_idx", steps=True, body=[
                    batch,
                    TeacherTopKTargets(field="batch", topk=k, routed=routed),
                    *optional(test, When(Every.before_step(cfg.evaluation.every), [Evaluate(evaluator=held_out)])),
                    submit_train_step(SoftCrossEntropyLoss(), cfg.optimizer),
                    Await("step_queue", into="step_result", keep=1),
                    LogTrainStep(),
                    When(Every(cfg.checkpoint.save_every, "step"), [*drain, SaveCheckpoint()]),
                ]),
            ]),
            *drain,
            *optional(test, Evaluate(evaluator=held_out, report=True)),
            SaveFinal(),
            *registration_nodes(cfg, recipe, start),
        ],
    )  # fmt: skip


def _loaded(
    cfg: OffPolicyDistillationWorkflowConfig, convert: RowConverter | None
) -> tuple[list[Node], list[Node], Node]:
    """The whole dataset loaded and tokenized first, shuffled per epoch, batches in that order."""
    data = [*_data(cfg, convert), _tokenize(cfg)]
    return data, [ShuffleEpoch(seed=cfg.seed)], GetBatch(batch_size=cfg.batch_size)


def _composed(
    cfg: OffPolicyDistillationWorkflowConfig,
    convert: RowConverter | None,
    extra_converters: Sequence[RowConverter],
) -> tuple[list[Node], list[Node], Node]:
    """`cfg.dataset` and every extra source tokenized, mixed per batch by their weights."""
    if len(extra_converters) != len(cfg.extra_sources):
        raise ConfigError(f"{len(cfg.extra_sources)} extra sources but {len(extra_converters)} row converters")  # fmt: skip
    extra = tuple(
        (s.dataset, s.split, c) for s, c in zip(cfg.extra_sources, extra_converters, strict=True)
    )
    compose = ComposeSources(
        extra=extra,
        weights=(cfg.dataset_weight, *(s.weight for s in cfg.extra_sources)),
        batch_size=cfg.batch_size,
        num_epochs=cfg.num_epochs,
        seed=cfg.seed,
        max_length=cfg.max_length,
        train_on_what=cfg.train_on_what,
    )
    return [*_data(cfg, convert), _tokenize(cfg), compose], [], CompositeBatch()


def _streamed(
    cfg: OffPolicyDistillationWorkflowConfig, convert: RowConverter | None
) -> tuple[list[Node], list[Node], Node]:
    """The training rows streamed, a batch tokenized as its step reaches it; the held-out
    conversations loaded whole."""
    if convert is None:
        raise ConfigError("stream_dataset needs the dataset's row converter")
    held_out: list[Node] = []
    if cfg.test_dataset:
        held_out = [
            LoadDataset(
                cfg.test_dataset, "test_conversations", split=cfg.test_split, convert=convert
            ),
            TokenizeHeldOut(max_length=cfg.max_length, train_on_what=cfg.train_on_what),
        ]
    stream = OpenRowStream(
        source=cfg.dataset,
        split=cfg.dataset_split,
        max_rows=cfg.max_prompts,
        batch_size=cfg.batch_size,
        shuffle_buffer=cfg.stream_shuffle_buffer,
        seed=cfg.seed,
    )
    batch = StreamedBatch(
        batch_size=cfg.batch_size,
        convert=convert,
        max_length=cfg.max_length,
        train_on_what=cfg.train_on_what,
    )
    return [stream, *held_out], [], batch
