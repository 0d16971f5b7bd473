"""code_rl: RL on code generation with a real sandbox, as tinker-cookbook's code_rl (DeepCoder).

Locally: SmolLM2-135M-Instruct on the bundled small problems, programs run in bubblewrap jails,
HumanEval pass@1 on a few problems before and after. `--preset cookbook`: tinker-cookbook's run,
DeepCoder on Qwen3.5-9B through Tinker with a SandboxFusion service (SANDBOX_URL).
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field, model_validator

from cookbook.envs.code import CodeEnvName, CodeEnvs, CodeEnvSettings
from cookbook.envs.humaneval import HumanEvalPassAtK
from cookbook.recipes import SMOLLM2
from cookbook.recipes.episodes import episode_limits
from kitchen.engine.graph import Workflow
from kitchen.engine.recipe import Recipe
from kitchen.workflows.reinforcement.code_workflow import CodeRLWorkflowConfig, code_reinforcement
from kitchen.workflows.reinforcement.state import CodeRLState


class CodeRLConfig(CodeRLWorkflowConfig):
    defaults: ClassVar[dict[str, Any]] = {
        "model_name": SMOLLM2,
        "groups_per_batch": 1,
        "num_batches": 5,
        "max_tokens": 192,
        # crucible_kitchen's CodeRL algorithm: PPO clip 0.2, 4 passes per batch, GAE(0.99, 0.95)
        "loss_fn": "ppo",
        "clip_epsilon": 0.2,
        "ppo_epochs": 4,
        "advantage_estimator": "gae",
        "gamma": 0.99,
        "gae_lambda": 0.95,
        "eval_every": 0,
    }
    env: CodeEnvName = Field(
        "bundled",
        description="bundled (the small problems of bundled:code) | deepcoder "
        "(agentica-org/DeepCoder-Preview-Dataset: train primeintellect+taco+lcbv5, test "
        "codeforces+lcbv5)",
    )
    dataset: str | None = Field(
        None,
        description="Train problems instead of the env's: comma-separated bundled:NAME, local "
        "JSONL/parquet files in DeepCoder's row shape, or hub names",
    )
    test_dataset: str | None = Field(
        None,
        description="Test problems instead of the env's (read as split 'test': data/x.jsonl -> "
        "data/x_test.jsonl); bundled has none",
    )
    num_test_problems: int | None = Field(
        0, ge=0, description="Test problems evaluated every eval_every steps (None = all, 0 = none)"
    )
    max_turns: int = Field(
        2, ge=1, description="Turns per episode: check_solution calls allowed = max_turns - 1"
    )
    format_coef: float = Field(
        0.1, ge=0, description="Reward lost by an answer without a fenced code block"
    )
    check_solution_tests: int = Field(
        0, ge=0, description="Tests check_solution runs (the first N; 0 = all, as tinker-cookbook)"
    )
    sandbox_timeout: float = Field(6.0, gt=0, description="CPU seconds per test case")
    sandbox_memory_mb: int = Field(512, gt=0, description="Address space per program, MiB")
    max_trajectory_tokens: int = Field(
        32 * 1024,
        ge=1,
        description="End an episode whose next prompt + max_tokens would exceed this",
    )
    context_overflow_reward: float = Field(
        -0.1, description="Reward of an episode cut by max_tokens or max_trajectory_tokens"
    )
    humaneval_limit: int = Field(
        4,
        ge=0,
        le=164,
        description="HumanEval problems evaluated before and after training (0 = skip)",
    )
    humaneval_samples: int = Field(
        1, ge=1, description="Samples per HumanEval problem (n of the pass@k estimator)"
    )
    humaneval_k: int = Field(
        1, ge=1, description="Also report pass@k for this k (<= humaneval_samples)"
    )
    humaneval_temperature: float = Field(
        0.0, ge=0, description="HumanEval sampling temperature (0 = greedy; > 0 when samples > 1)"
    )
    humaneval_max_tokens: int = Field(256, ge=1, description="Max tokens per HumanEval answer")

    @model_validator(mode="after")
    def _code_options(self) -> CodeRLConfig:
        if self.humaneval_k > self.humaneval_samples:
            raise ValueError(
                f"humaneval_k {self.humaneval_k} needs at least as many samples per problem; "
                f"humaneval_samples is {self.humaneval_samples}"
            )
        if self.humaneval_samples > 1 and self.humaneval_temperature == 0:
            raise ValueError(
                "humaneval_samples > 1 at temperature 0 draws the same answer n times; set "
                "humaneval_temperature > 0"
            )
        has_test = self.env == "deepcoder" or self.test_dataset is not None
        if self.evaluation.every and (not has_test or self.num_test_problems == 0):
            raise ValueError(
                f"eval_every {self.evaluation.every} needs test problems: env {self.env} with "
                f"test_dataset {self.test_dataset} and num_test_problems {self.num_test_problems}"
            )
        return self


class CodeRL(Recipe[CodeRLConfig]):
    """RL on code with a sandbox (bundled problems or DeepCoder); HumanEval pass@k before/after."""

    name = "code_rl"

    def workflow(self, cfg: CodeRLConfig) -> Workflow[CodeRLState]:
        settings = CodeEnvSettings(
            **episode_limits(cfg), check_tests=cfg.check_solution_tests or None
        )
        envs = CodeEnvs(
            cfg.env,
            cfg.groups_per_batch,
            cfg.group_size,
            settings,
            cfg.dataset,
            cfg.test_dataset,
            cfg.num_test_problems,
            cfg.sandbox_timeout,
            cfg.sandbox_memory_mb,
            cfg.seed,
        )
        evaluator = None
        if cfg.humaneval_limit:
            evaluator = HumanEvalPassAtK(
                cfg.humaneval_limit,
                cfg.humaneval_samples,
                cfg.humaneval_temperature,
                cfg.humaneval_max_tokens,
                cfg.sandbox_timeout,
            )
        ks = tuple(sorted({1, cfg.humaneval_k}))
        return code_reinforcement(cfg, envs, evaluator, ks)
