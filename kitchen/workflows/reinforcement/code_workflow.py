"""RL on code with a sandbox, as tinker-cookbook's code_rl: the sync RL loop of `workflow.py` (the
same sections), plus a sandbox resource and a pass@k evaluator, with a PPO-style recipe's knobs:

- a sandbox opened first and closed in `finally_`; the env datasets are built with it;
- a pass@k benchmark (HumanEval in code_rl) graded in that sandbox, before the first step and
  after the last;
- `gae` advantages per turn (gamma, gae_lambda);
- `clip_epsilon`: the ppo / cispo loss's clip thresholds 1 - e and 1 + e;
- `ppo_epochs`: optimizer passes over each batch of rollouts (old policy = the sampler).
"""

from __future__ import annotations

from kitchen.engine.graph import Loop, Node, When, Workflow
from kitchen.workflows.common.checkpoint import SaveFinal
from kitchen.workflows.common.start import registration_nodes, start_point
from kitchen.workflows.reinforcement.config import CodeRLWorkflowConfig
from kitchen.workflows.reinforcement.pass_at_k import CodeEvaluator, EvaluatePassAtK, FirstStep
from kitchen.workflows.reinforcement.sandbox import CloseSandbox, OpenSandbox
from kitchen.workflows.reinforcement.stages import RefreshSampler
from kitchen.workflows.reinforcement.state import CodeRLState
from kitchen.workflows.reinforcement.workflow import (
    evaluate,
    kl_reference,
    periodic_eval,
    setup,
    sync_body,
    train,
)
from train_core.rl.types import RLDatasetFactory

__all__ = ["CodeRLWorkflowConfig", "code_reinforcement"]


def code_reinforcement(
    cfg: CodeRLWorkflowConfig,
    make_dataset: RLDatasetFactory,
    evaluator: CodeEvaluator | None = None,
    ks: tuple[int, ...] = (1,),
    recipe: str = "code_rl",
) -> Workflow[CodeRLState]:
    """Sync RL over the env datasets `make_dataset(env_ctx, sandbox)` builds; with `evaluator`,
    pass@k (each k in `ks`) before training (`humaneval_before/...`) and after (`humaneval/...`)."""
    start = start_point(cfg, cfg.checkpoint.load_path)
    sandbox = OpenSandbox(
        kind=cfg.sandbox,
        url=cfg.sandbox_url,
        max_concurrency=cfg.sandbox_max_concurrency,
    )
    ppo = train(
        cfg,
        loss_fn_config=cfg.effective_loss_fn_config(),
        ppo_epochs=cfg.ppo_epochs,
        gamma=cfg.gamma,
        gae_lambda=cfg.gae_lambda,
    )
    nodes: list[Node] = [
        sandbox,
        *setup(cfg, make_dataset, start, reference_model=kl_reference(cfg, start), sandboxed=True),
    ]
    if evaluator is not None:
        before = EvaluatePassAtK(
            evaluator=evaluator, ks=ks, result_key="humaneval_before", name="humaneval_before"
        )
        nodes.append(When(FirstStep(), [RefreshSampler(), before]))
    body = sync_body(cfg, ppo, post_kl=cfg.kl.compute_post_kl, evaluation=periodic_eval(cfg))
    loop = Loop("iteration", "n_batches", "batch_idx", steps=True, body=body)
    nodes += [loop, SaveFinal()]
    final: list[Node] = []  # on the final weights, after the last checkpoint
    if evaluator is not None:
        final.append(EvaluatePassAtK(evaluator=evaluator, ks=ks, name="humaneval_after"))
    if cfg.evaluation.every:
        final.append(evaluate(cfg, report=True))
    if final:
        nodes += [RefreshSampler(), *final]
    nodes += registration_nodes(cfg, recipe, start)
    return Workflow(
        "code_rl", CodeRLState, nodes, finally_=[CloseSandbox()], description=__doc__ or ""
    )
