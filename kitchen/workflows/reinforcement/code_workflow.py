"""RL on code with a sandbox, as tinker-cookbook's code_rl: the sync RL loop of
`reinforcement.py` (same stages), plus what code needs and the knobs of a PPO-style recipe:

- a sandbox opened first and closed in `finally_`; the env datasets are built with it;
- a pass@k benchmark (HumanEval in code_rl) graded in that sandbox, before the first step and
  after the last;
- `gae` advantages per turn (gamma, gae_lambda) instead of one advantage per trajectory;
- `clip_epsilon`: the ppo / cispo loss's clip thresholds 1 - e and 1 + e;
- `ppo_epochs`: optimizer passes over each batch of rollouts (old policy = the sampler).
"""

from __future__ import annotations

from kitchen.engine.graph import Every, Loop, Node, When, Workflow
from kitchen.workflows.common.checkpoint import SaveCheckpoint, SaveFinal
from kitchen.workflows.common.setup import InitTrainingClient
from kitchen.workflows.common.start import register, start_point
from kitchen.workflows.reinforcement.code_stages import (
    AssembleTurnData,
    BuildSandboxedRLDataset,
    CloseSandbox,
    ComputeTurnAdvantages,
    FirstStep,
    OpenSandbox,
    SandboxedDatasetFactory,
    TrainEpochs,
)
from kitchen.workflows.reinforcement.config import CodeRLWorkflowConfig
from kitchen.workflows.reinforcement.pass_at_k import CodeEvaluator, EvaluatePassAtK
from kitchen.workflows.reinforcement.rollout import DoRollouts, EvaluateRL, WriteRollouts
from kitchen.workflows.reinforcement.stages import (
    AssembleData,
    ComputeAdvantages,
    InitReferenceClient,
    LogRLStep,
    RefreshSampler,
)
from kitchen.workflows.reinforcement.state import CodeRLState
from kitchen.workflows.reinforcement.train import ApplyKLPenalty, ComputePostKL


def _advantages(cfg: CodeRLWorkflowConfig) -> list[Node]:
    if cfg.advantage_estimator == "gae":
        return [
            ComputeTurnAdvantages(cfg.gamma, cfg.gae_lambda),
            AssembleTurnData(cfg.remove_constant_reward_groups),
        ]
    return [
        ComputeAdvantages(cfg.advantage_estimator),
        AssembleData(cfg.remove_constant_reward_groups),
    ]


def _body(cfg: CodeRLWorkflowConfig) -> list[Node]:
    evaluate = EvaluateRL(cfg.max_tokens, cfg.evaluation.temperature)
    kl = [ApplyKLPenalty(cfg.kl.penalty_coef, cfg.kl.discount_factor)] if cfg.kl.penalty_coef > 0 else []  # fmt: skip
    train = TrainEpochs(
        cfg.optimizer.learning_rate,
        cfg.loss_fn,
        cfg.effective_loss_fn_config(),
        cfg.num_substeps,
        cfg.ppo_epochs,
        cfg.optimizer.schedule,
    )
    return [
        RefreshSampler(),
        *(
            [When(Every(cfg.evaluation.every, "step", offset=0), [evaluate])]
            if cfg.evaluation.every
            else []
        ),
        DoRollouts(cfg.max_tokens, cfg.temperature, cfg.coalesce_samples),
        WriteRollouts(),
        *_advantages(cfg),
        *kl,
        train,
        *([ComputePostKL()] if cfg.kl.compute_post_kl else []),
        LogRLStep(),
        *(
            [When(Every(cfg.checkpoint.save_every, "step"), [SaveCheckpoint()])]
            if cfg.checkpoint.save_every
            else []
        ),
    ]


def code_reinforcement(
    cfg: CodeRLWorkflowConfig,
    make_dataset: SandboxedDatasetFactory,
    evaluator: CodeEvaluator | None = None,
    ks: tuple[int, ...] = (1,),
    recipe: str = "code_rl",
) -> Workflow[CodeRLState]:
    """Sync RL over the env datasets `make_dataset(env_ctx, sandbox)` builds; with `evaluator`,
    pass@k (each k in `ks`) before training (`humaneval_before/...`) and after (`humaneval/...`)."""
    start = start_point(cfg, cfg.checkpoint.load_path)
    reference = (cfg.kl.reference_model or start.model_name) if cfg.kl.penalty_coef > 0 else None
    before: list[Node] = []
    after: list[Node] = []
    if evaluator is not None:
        first = EvaluatePassAtK(evaluator, ks, result_key="humaneval_before", name="humaneval_before")  # fmt: skip
        before = [When(FirstStep(), [RefreshSampler(), first])]
        after = [RefreshSampler(), EvaluatePassAtK(evaluator, ks, name="humaneval_after")]
    final_eval: list[Node] = []
    if cfg.evaluation.every:
        refresh: list[Node] = [] if after else [RefreshSampler()]
        final_eval = [*refresh, EvaluateRL(cfg.max_tokens, cfg.evaluation.temperature, report=True)]
    return Workflow(
        "code_rl",
        CodeRLState,
        steps=[
            OpenSandbox(cfg.sandbox_backend, cfg.sandbox_url, cfg.sandbox_max_concurrency),
            InitTrainingClient(
                start.model_name,
                lora_rank=cfg.lora_rank,
                renderer_name=cfg.renderer_name,
                seed=cfg.seed,
                load_checkpoint_path=start.load_checkpoint_path,
            ),
            BuildSandboxedRLDataset(make_dataset, cfg.num_batches),
            *([InitReferenceClient(reference)] if reference else []),
            *before,
            Loop("iteration", "n_batches", "batch_idx", steps=True, body=_body(cfg)),
            SaveFinal(),
            *after,
            *final_eval,
            *register(cfg, recipe, start),
        ],
        finally_=[CloseSandbox()],
        description=__doc__ or "",
    )
