"""Preference learning with DPO, as tinker-cookbook's train_dpo: per batch, the frozen reference
scores the (chosen, rejected) pairs, then forward_backward_custom with the DPO loss and one
update (optim_step). Steps are pipelined like the SL loop (step N+1 is submitted before step N is
awaited); the held-out evaluation runs before a step (pre-step weights) every eval_every steps and
once more at the end; the pipeline is drained before each checkpoint."""

from __future__ import annotations

from kitchen.engine.graph import Await, Every, Loop, Node, When, Workflow
from kitchen.workflows.common.batches import GetBatch, ShuffleEpoch
from kitchen.workflows.common.checkpoint import SaveCheckpoint, SaveFinal, rolling_checkpoints
from kitchen.workflows.common.clients import OpenSamplingClient
from kitchen.workflows.common.evaluate import Evaluate
from kitchen.workflows.common.parts import WorkflowParts, optional
from kitchen.workflows.common.setup import LoadDataset, RowConverter
from kitchen.workflows.common.start import (
    StartPoint,
    init_training_client,
    registration_nodes,
    start_point,
)
from kitchen.workflows.common.train_step import LogTrainStep, submit_train_step
from kitchen.workflows.preference.config import PreferenceConfig
from kitchen.workflows.preference.stages import (
    BuildPreferenceDataset,
    ComputeReferenceLogprobs,
    DPOLoss,
)
from kitchen.workflows.preference.state import PreferenceState
from kitchen.workflows.preference.transcript import WritePairs
from train_core.preference import PAIR
from train_core.preference.evaluator import PreferenceEvaluator

# crucible_kitchen's dpo_metrics: the last step's DPO loss and reward statistics.
DPO_SUMMARY = (
    ("loss", "dpo_loss"),
    ("accuracy", "accuracy"),
    ("margin", "margin"),
    ("chosen_reward", "chosen_reward"),
    ("rejected_reward", "rejected_reward"),
)


def _clients(cfg: PreferenceConfig, start: StartPoint) -> list[Node]:
    """The policy's training client and the frozen reference: the policy's starting weights
    unless another model is named."""
    reference_state = None if cfg.reference_model_name else start.load_checkpoint_path
    return [
        init_training_client(cfg, start),
        OpenSamplingClient(
            base_model=cfg.reference_model_name or start.model_name,
            initial_state_path=reference_state,
        ),
    ]


def _data(
    cfg: PreferenceConfig, convert: RowConverter | None, test_convert: RowConverter | None
) -> list[Node]:
    """Comparisons, train and (when a test dataset is named) held-out."""
    return [
        LoadDataset(cfg.dataset, "comparisons", split=cfg.dataset_split, convert=convert,
                    limit=cfg.n_train_samples, fingerprint=True),
        *optional(bool(cfg.test_dataset),
                  LoadDataset(cfg.test_dataset or "", "test_comparisons", split=cfg.test_split,
                              convert=test_convert, limit=cfg.test_size, fingerprint=True,
                              name="load_test_dataset")),
    ]  # fmt: skip


def _pairs(cfg: PreferenceConfig) -> list[Node]:
    """Datum pairs, and the reference's logprobs of the held-out pairs (computed once: the
    reference never changes)."""
    test = bool(cfg.test_dataset)
    return [
        BuildPreferenceDataset(batch_size=cfg.batch_size, max_length=cfg.max_length,
                               overflow=cfg.overflow, num_epochs=cfg.num_epochs, with_test=test),
        *optional(test, ComputeReferenceLogprobs(source="test_data", into="test_reference_logprobs",
                                                 name="reference_test")),
    ]  # fmt: skip


def preference_parts(
    cfg: PreferenceConfig,
    convert: RowConverter | None = None,
    test_convert: RowConverter | None = None,
    recipe: str = "preference",
) -> WorkflowParts:
    """The DPO workflow in parts; `train` starts from `comparisons` (and `test_comparisons`)."""
    start = start_point(cfg, cfg.checkpoint.load_path)
    test = cfg.test_dataset is not None
    evaluator = PreferenceEvaluator(beta=cfg.dpo_beta)
    log: list[Node] = [
        LogTrainStep(into="dpo_metrics", summary=DPO_SUMMARY),
        WritePairs(beta=cfg.dpo_beta),
    ]
    drain: list[Node] = [Await("step_queue", into="step_result"), *log]
    train: list[Node] = [
        *_pairs(cfg),
        Loop("epoch", cfg.num_epochs, "epoch_idx", [
            ShuffleEpoch(seed=cfg.seed, group_size=PAIR),
            Loop("batch", "n_batches", "batch_idx", steps=True, body=[
                GetBatch(batch_size=cfg.batch_size, group_size=PAIR),
                *optional(test, When(Every.before_step(cfg.evaluation.every), [Evaluate(evaluator=evaluator)])),
                ComputeReferenceLogprobs(),
                submit_train_step(DPOLoss(beta=cfg.dpo_beta), cfg.optimizer),
                Await("step_queue", into="step_result", keep=1),
                *log,
                When(Every(cfg.checkpoint.save_every, "step"), [*drain, SaveCheckpoint()]),
                *rolling_checkpoints(cfg.checkpoint, drain),
            ]),
        ]),
        *drain,
        *optional(test, Evaluate(evaluator=evaluator, report=True)),
    ]  # fmt: skip
    finish = [SaveFinal(), *registration_nodes(cfg, recipe, start)]
    return WorkflowParts(_clients(cfg, start), _data(cfg, convert, test_convert), train, finish)


def preference(
    cfg: PreferenceConfig,
    convert: RowConverter | None = None,
    test_convert: RowConverter | None = None,
    recipe: str = "preference",
) -> Workflow[PreferenceState]:
    """The DPO workflow; `convert` turns dataset rows into comparison rows (prompt_conversation,
    completion_A, completion_B, label), `test_convert` the held-out rows (default: `convert`);
    `recipe` names the run in the model registry."""
    parts = preference_parts(cfg, convert, test_convert or convert, recipe)
    return Workflow("preference", PreferenceState, nodes=parts.nodes(), description=__doc__ or "")
