"""A run of sections, and RL against a preference model with win-rate evaluation."""

from __future__ import annotations

from collections.abc import Sequence

from kitchen.engine.graph import Every, Loop, Node, When, Workflow
from kitchen.workflows.common.checkpoint import SaveFinal
from kitchen.workflows.common.evaluate import Evaluate
from kitchen.workflows.common.start import registration_nodes, start_point
from kitchen.workflows.reinforcement.config import RLConfig
from kitchen.workflows.reinforcement.stages import RefreshSampler
from kitchen.workflows.reinforcement.state import RLState
from kitchen.workflows.reinforcement.workflow import kl_reference, setup, sync_body, train
from kitchen.workflows.rlhf.sections import RunSection
from kitchen.workflows.rlhf.state import RLHFState
from train_core.preference.win_rate import ComparisonEvaluator
from train_core.rl.types import RLDatasetFactory


def sectioned(name: str, sections: Sequence[RunSection]) -> Workflow[RLHFState]:
    """The sections in order; each one's plan is validated now, as a workflow of its own (its
    ports are the run's: a section names the ports its stages need)."""
    for section in sections:
        section.plan().validate()
    return Workflow(name, RLHFState, nodes=list(sections))


def preference_rl(
    cfg: RLConfig, make_dataset: RLDatasetFactory, recipe: str = "preference_rl"
) -> Workflow[RLState]:
    """The sync RL loop over preference envs; the env dataset's test set is a ReferenceSet, and the
    evaluation is the policy's win rate against it (before steps 0, every, 2 every, ... and at
    the end), in place of the mean test reward."""
    start = start_point(cfg, cfg.checkpoint.load_path)
    win_rate = ComparisonEvaluator(
        max_tokens=cfg.max_tokens, temperature=cfg.evaluation.temperature
    )
    evaluation: list[Node] = []
    final: list[Node] = []
    if cfg.evaluation.every:
        evaluate = Evaluate(evaluator=win_rate, sampler="sampling_client", into=None)
        evaluation = [When(Every(cfg.evaluation.every, "step", offset=0), [evaluate])]
        final = [
            RefreshSampler(),
            Evaluate(evaluator=win_rate, sampler="sampling_client", report=True),
        ]
    body = sync_body(
        cfg, train(cfg, loss_fn_config=cfg.loss_fn_config), post_kl=cfg.kl.compute_post_kl,
        evaluation=evaluation,
    )  # fmt: skip
    return Workflow(
        "preference_rl",
        RLState,
        nodes=[
            *setup(cfg, make_dataset, start, reference_model=kl_reference(cfg, start)),
            Loop("iteration", "n_batches", "batch_idx", steps=True, body=body),
            *final,
            SaveFinal(),
            *registration_nodes(cfg, recipe, start),
        ],
    )
