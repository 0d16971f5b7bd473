"""Preference learning with DPO, as tinker-cookbook's train_dpo: per batch, the frozen reference
scores the (chosen, rejected) pairs, then forward_backward_custom with the DPO loss and an
optimizer step. Steps are pipelined like the SL loop (step N+1 is submitted before step N is
awaited); the held-out evaluation runs before a step (pre-step weights) every eval_every steps and
once more at the end; the pipeline is drained before each checkpoint."""

from __future__ import annotations

from kitchen.engine.graph import Await, Every, Loop, Node, When, Workflow
from kitchen.workflows.common.checkpoint import SaveCheckpoint, SaveFinal
from kitchen.workflows.common.setup import InitTrainingClient, LoadDataset, RowConverter
from kitchen.workflows.common.start import StartPoint, register, start_point
from kitchen.workflows.preference.config import PreferenceConfig
from kitchen.workflows.preference.stages import (
    BuildPreferenceDataset,
    ComputeReferenceLogprobs,
    DPOForwardBackward,
    EvaluatePreference,
    GetPreferenceBatch,
    InitReference,
    LogDPOStep,
    OptimStep,
    ShufflePairs,
)
from kitchen.workflows.preference.state import PreferenceState
from kitchen.workflows.supervised.stages import AdamSettings


def setup(
    cfg: PreferenceConfig,
    convert: RowConverter | None,
    test_convert: RowConverter | None,
    start: StartPoint,
) -> list[Node]:
    """Training client and frozen reference, comparisons (train and held-out), datum pairs, and
    the reference's logprobs of the held-out pairs (computed once: the reference never changes)."""
    test: list[Node] = []
    if cfg.test_dataset:
        test = [
            LoadDataset(cfg.test_dataset, "test_comparisons", split=cfg.test_split,
                        convert=test_convert, limit=cfg.test_size, fingerprint=True,
                        name="load_test_dataset"),
        ]  # fmt: skip
    with_test = bool(cfg.test_dataset)
    # The policy's starting weights are the reference unless another model is named.
    reference_state = None if cfg.reference_model_name else start.load_checkpoint_path
    return [
        InitTrainingClient(
            start.model_name,
            lora_rank=cfg.lora_rank,
            renderer_name=cfg.renderer_name,
            seed=cfg.seed,
            load_checkpoint_path=start.load_checkpoint_path,
        ),
        InitReference(cfg.reference_model_name or start.model_name, reference_state),
        LoadDataset(cfg.dataset, "comparisons", split=cfg.dataset_split, convert=convert,
                    fingerprint=True),
        *test,
        BuildPreferenceDataset(
            cfg.batch_size, cfg.max_length, cfg.overflow, cfg.num_epochs, with_test
        ),
        *([ComputeReferenceLogprobs("test_data", "test_reference_logprobs", name="reference_test")] if with_test else []),
    ]  # fmt: skip


def preference(
    cfg: PreferenceConfig,
    convert: RowConverter | None = None,
    test_convert: RowConverter | None = None,
    recipe: str = "preference",
) -> Workflow[PreferenceState]:
    """The DPO workflow; `convert` turns dataset rows into comparison rows (prompt_conversation,
    completion_A, completion_B, label), `test_convert` the held-out rows (default: `convert`);
    `recipe` names the run in the model registry."""
    adam = AdamSettings(
        cfg.optimizer.beta1,
        cfg.optimizer.beta2,
        cfg.optimizer.eps,
        cfg.optimizer.weight_decay,
        cfg.optimizer.grad_clip_norm,
    )
    evaluate = cfg.test_dataset is not None
    start = start_point(cfg, cfg.checkpoint.load_path)
    drain: list[Node] = [Await("step_queue", into="step_result"), LogDPOStep()]
    return Workflow(
        "preference",
        PreferenceState,
        steps=[
            *setup(cfg, convert, test_convert or convert, start),
            Loop("epoch", cfg.num_epochs, "epoch_idx", [
                ShufflePairs(seed=cfg.seed),
                Loop("batch", "n_batches", "batch_idx", steps=True, body=[
                    GetPreferenceBatch(cfg.batch_size),
                    *([When(Every(cfg.evaluation.every, "step", offset=0), [EvaluatePreference(cfg.dpo_beta)])] if evaluate else []),
                    ComputeReferenceLogprobs(),
                    DPOForwardBackward(cfg.dpo_beta),
                    OptimStep(cfg.optimizer.learning_rate, cfg.optimizer.schedule, cfg.optimizer.warmup_steps, adam),
                    Await("step_queue", into="step_result", keep=1),
                    LogDPOStep(),
                    When(Every(cfg.checkpoint.save_every, "step"), [*drain, SaveCheckpoint()]),
                ]),
            ]),
            *drain,
            *([EvaluatePreference(cfg.dpo_beta, report=True)] if evaluate else []),
            SaveFinal(),
            *register(cfg, recipe, start),
        ],
        description=__doc__ or "",
    )  # fmt: skip
