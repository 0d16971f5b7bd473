"""Supervised fine-tuning, pipelined as tinker-cookbook's SL loop: step N+1 is submitted before
step N is awaited; evaluation runs before a step is submitted (pre-step weights); the pipeline is
drained before each checkpoint so a resume neither replays nor skips a batch."""

from __future__ import annotations

from kitchen.engine.graph import Await, Every, Loop, Node, When, Workflow
from kitchen.workflows.common.checkpoint import SaveCheckpoint, SaveFinal
from kitchen.workflows.common.evaluate import EvaluateLabels
from kitchen.workflows.common.sampling import SamplePrompts, ShowSamples
from kitchen.workflows.common.setup import InitTrainingClient, LoadDataset, RowConverter
from kitchen.workflows.common.start import StartPoint, register, start_point
from kitchen.workflows.supervised.config import SupervisedConfig
from kitchen.workflows.supervised.stages import (
    AdamSettings,
    EvaluateNLL,
    GetBatch,
    LogTrainStep,
    ShuffleEpoch,
    SubmitTrainStep,
    TokenizeConversations,
)
from kitchen.workflows.supervised.state import SupervisedState


def setup(cfg: SupervisedConfig, convert: RowConverter | None, start: StartPoint) -> list[Node]:
    """Training client, conversations (train and held-out), datums."""
    test: list[Node] = []
    if cfg.test_dataset:
        test = [
            LoadDataset(
                cfg.test_dataset,
                "test_conversations",
                split=cfg.test_split,
                convert=convert,
                fingerprint=True,
            )
        ]
    return [
        InitTrainingClient(
            start.model_name,
            lora_rank=cfg.lora_rank,
            renderer_name=cfg.renderer_name,
            seed=cfg.seed,
            load_checkpoint_path=start.load_checkpoint_path,
        ),
        LoadDataset(cfg.dataset, "conversations", convert=convert, fingerprint=True),
        *test,
        TokenizeConversations(cfg.batch_size, cfg.max_length, cfg.train_on_what, cfg.num_epochs, with_test=bool(cfg.test_dataset)),
    ]  # fmt: skip


def supervised(
    cfg: SupervisedConfig, convert: RowConverter | None = None, recipe: str = "supervised"
) -> Workflow[SupervisedState]:
    adam = AdamSettings(
        cfg.optimizer.beta1,
        cfg.optimizer.beta2,
        cfg.optimizer.eps,
        cfg.optimizer.weight_decay,
        cfg.optimizer.grad_clip_norm,
    )
    show = cfg.num_samples_to_show > 0 and cfg.test_dataset is not None
    start = start_point(cfg, cfg.checkpoint.load_path)
    drain: list[Node] = [Await("step_queue", into="step_result"), LogTrainStep()]
    return Workflow(
        "supervised",
        SupervisedState,
        steps=[
            *setup(cfg, convert, start),
            *([SamplePrompts("samples_before", cfg.num_samples_to_show, cfg.sample_max_tokens)] if show else []),
            Loop("epoch", cfg.num_epochs, "epoch_idx", [
                ShuffleEpoch(seed=cfg.seed),
                Loop("batch", "n_batches", "batch_idx", steps=True, body=[
                    GetBatch(cfg.batch_size),
                    *([When(Every(cfg.evaluation.every, "step", offset=0), [EvaluateNLL()])] if cfg.test_dataset else []),
                    SubmitTrainStep(cfg.optimizer.learning_rate, cfg.optimizer.schedule, cfg.optimizer.warmup_steps, adam),
                    Await("step_queue", into="step_result", keep=1),
                    LogTrainStep(),
                    When(Every(cfg.checkpoint.save_every, "step"), [*drain, SaveCheckpoint()]),
                ]),
            ]),
            *drain,
            *([EvaluateNLL(report=True)] if cfg.test_dataset else []),
            *([EvaluateLabels(max_tokens=cfg.sample_max_tokens)] if cfg.eval_labels and cfg.test_dataset else []),
            SaveFinal(),
            *register(cfg, recipe, start),
            *([SamplePrompts("samples_after", cfg.num_samples_to_show, cfg.sample_max_tokens), ShowSamples()] if show else []),
        ],
    )  # fmt: skip


def supervised_flat(
    cfg: SupervisedConfig, convert: RowConverter | None = None, recipe: str = "supervised_flat"
) -> Workflow[SupervisedState]:
    """The minimal loop (tinker-cookbook's sl_loop): submit a step, await it, log, save. No
    pipelining and no evaluation, so it reads as the algorithm and nothing else."""
    adam = AdamSettings(
        cfg.optimizer.beta1,
        cfg.optimizer.beta2,
        cfg.optimizer.eps,
        cfg.optimizer.weight_decay,
        cfg.optimizer.grad_clip_norm,
    )
    start = start_point(cfg, cfg.checkpoint.load_path)
    return Workflow(
        "supervised_flat",
        SupervisedState,
        steps=[
            *setup(cfg.model_copy(update={"test_dataset": None}), convert, start),
            Loop("epoch", cfg.num_epochs, "epoch_idx", [
                ShuffleEpoch(seed=cfg.seed),
                Loop("batch", "n_batches", "batch_idx", steps=True, body=[
                    GetBatch(cfg.batch_size),
                    SubmitTrainStep(cfg.optimizer.learning_rate, cfg.optimizer.schedule, cfg.optimizer.warmup_steps, adam),
                    Await("step_queue", into="step_result"),
                    LogTrainStep(),
                    When(Every(cfg.checkpoint.save_every, "step"), [SaveCheckpoint()]),
                ]),
            ]),
            SaveFinal(),
            *register(cfg, recipe, start),
        ],
    )  # fmt: skip
