"""Supervised fine-tuning, pipelined as tinker-cookbook's SL loop: step N+1 is submitted before
step N is awaited; evaluation runs before a step is submitted (pre-step weights); the pipeline is
drained before each checkpoint so a resume neither replays nor skips a batch."""

from __future__ import annotations

from collections.abc import Sequence

from kitchen.engine.graph import Await, Every, Loop, Node, When, Workflow
from kitchen.workflows.common.batches import GetBatch, ShuffleEpoch
from kitchen.workflows.common.checkpoint import SaveCheckpoint, SaveFinal, rolling_checkpoints
from kitchen.workflows.common.evaluate import (
    Evaluate,
    Scheduled,
    final_evaluations,
    scheduled_evaluations,
)
from kitchen.workflows.common.parts import WorkflowParts, optional
from kitchen.workflows.common.sampling import SamplePrompts, ShowSamples
from kitchen.workflows.common.setup import LoadDataset, RowConverter
from kitchen.workflows.common.start import (
    StartPoint,
    init_training_client,
    registration_nodes,
    start_point,
)
from kitchen.workflows.common.train_step import LogTrainStep, submit_train_step
from kitchen.workflows.supervised.config import SupervisedConfig
from kitchen.workflows.supervised.stages import CrossEntropyLoss, TokenizeConversations
from kitchen.workflows.supervised.state import SupervisedState
from train_core.evaluation.evaluator import Evaluator
from train_core.evaluation.labels import LabelEvaluator
from train_core.supervised.evaluator import NLLEvaluator


def _data(cfg: SupervisedConfig, convert: RowConverter | None) -> list[Node]:
    """Conversations (train, and held-out when a test dataset is named)."""
    return [
        LoadDataset(cfg.dataset, "conversations", split=cfg.dataset_split, convert=convert,
                    limit=cfg.n_train_samples, fingerprint=True),
        *optional(bool(cfg.test_dataset),
                  LoadDataset(cfg.test_dataset or "", "test_conversations", split=cfg.test_split,
                              convert=convert, fingerprint=True)),
    ]  # fmt: skip


def _tokenize(cfg: SupervisedConfig) -> TokenizeConversations:
    return TokenizeConversations(
        batch_size=cfg.batch_size,
        max_length=cfg.max_length,
        train_on_what=cfg.train_on_what,
        num_epochs=cfg.num_epochs,
        with_test=bool(cfg.test_dataset),
    )


def setup(cfg: SupervisedConfig, convert: RowConverter | None, start: StartPoint) -> list[Node]:
    """Training client, conversations (train and held-out), datums."""
    return [init_training_client(cfg, start), *_data(cfg, convert), _tokenize(cfg)]


def supervised_parts(
    cfg: SupervisedConfig,
    convert: RowConverter | None = None,
    recipe: str = "supervised",
    evaluator: Evaluator | None = None,
    scheduled: Sequence[Scheduled] = (),
) -> WorkflowParts:
    """The supervised workflow in parts. `train` starts from `conversations` (and
    `test_conversations` when cfg.test_dataset is set), whoever wrote them. The held-out
    `evaluator` defaults to the NLL of the test conversations, every cfg.evaluation.every steps;
    each of `scheduled` runs at its own cadence beside it, and again at the end."""
    start = start_point(cfg, cfg.checkpoint.load_path)
    held_out = evaluator or NLLEvaluator()
    test = bool(cfg.test_dataset)
    show = cfg.num_samples_to_show > 0 and cfg.test_dataset is not None
    drain: list[Node] = [Await("step_queue", into="step_result"), LogTrainStep()]
    train: list[Node] = [
        _tokenize(cfg),
        *optional(show, SamplePrompts(into="samples_before", n=cfg.num_samples_to_show,
                                      max_tokens=cfg.sample_max_tokens)),
        Loop("epoch", cfg.num_epochs, "epoch_idx", [
            ShuffleEpoch(seed=cfg.seed),
            Loop("batch", "n_batches", "batch_idx", steps=True, body=[
                GetBatch(batch_size=cfg.batch_size),
                *optional(test, When(Every.before_step(cfg.evaluation.every), [Evaluate(evaluator=held_out)])),
                *scheduled_evaluations(scheduled),
                submit_train_step(CrossEntropyLoss(), cfg.optimizer),
                Await("step_queue", into="step_result", keep=1),
                LogTrainStep(),
                When(Every(cfg.checkpoint.save_every, "step"), [*drain, SaveCheckpoint()]),
                *rolling_checkpoints(cfg.checkpoint, drain),
            ]),
        ]),
        *drain,
        *optional(test, Evaluate(evaluator=held_out, report=True)),
        *optional(test and cfg.eval_labels,
                  Evaluate(evaluator=LabelEvaluator(max_tokens=cfg.sample_max_tokens), report=True)),
        *final_evaluations(scheduled),
    ]  # fmt: skip
    finish: list[Node] = [
        SaveFinal(),
        *registration_nodes(cfg, recipe, start),
        *optional(show, SamplePrompts(into="samples_after", n=cfg.num_samples_to_show,
                                      max_tokens=cfg.sample_max_tokens), ShowSamples()),
    ]  # fmt: skip
    return WorkflowParts([init_training_client(cfg, start)], _data(cfg, convert), train, finish)


def supervised(
    cfg: SupervisedConfig,
    convert: RowConverter | None = None,
    recipe: str = "supervised",
    scheduled: Sequence[Scheduled] = (),
) -> Workflow[SupervisedState]:
    parts = supervised_parts(cfg, convert, recipe, scheduled=scheduled)
    return Workflow("supervised", SupervisedState, nodes=parts.nodes())


def supervised_flat(
    cfg: SupervisedConfig, convert: RowConverter | None = None, recipe: str = "supervised_flat"
) -> Workflow[SupervisedState]:
    """The minimal loop (tinker-cookbook's sl_loop), kept flat as a teaching copy: submit a step,
    await it, log, save. No pipelining and no evaluation, so it reads as the algorithm and nothing
    else; `supervised` is the same stages with those added."""
    start = start_point(cfg, cfg.checkpoint.load_path)
    return Workflow(
        "supervised_flat",
        SupervisedState,
        nodes=[
            *setup(cfg.model_copy(update={"test_dataset": None}), convert, start),
            Loop("epoch", cfg.num_epochs, "epoch_idx", [
                ShuffleEpoch(seed=cfg.seed),
                Loop("batch", "n_batches", "batch_idx", steps=True, body=[
                    GetBatch(batch_size=cfg.batch_size),
                    submit_train_step(CrossEntropyLoss(), cfg.optimizer),
                    Await("step_queue", into="step_result"),
                    LogTrainStep(),
                    When(Every(cfg.checkpoint.save_every, "step"), [SaveCheckpoint()]),
                    *rolling_checkpoints(cfg.checkpoint),
                ]),
            ]),
            SaveFinal(),
            *registration_nodes(cfg, recipe, start),
        ],
    )  # fmt: skip
