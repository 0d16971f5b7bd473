"""rubric: RL against a prompted LLM grader scoring each answer on rubric items, as
tinker-cookbook's recipes/rubric. The grader is a second sampling client on a frozen base model
(by default the policy's own base); its failures and timeouts are counted and bounded
(cookbook.envs.rubric), never a crashed step.

Locally: SmolLM2-135M-Instruct answers the cookbook's synthetic additions and grades them
(a weak grader: the run shows the plumbing, not a trained adder). `--preset cookbook`:
Qwen3.5-9B graded by Qwen3.6-35B-A3B through Tinker, 100 groups of 4, LR 1e-5.
"""

from __future__ import annotations

from functools import partial
from typing import Any, ClassVar

from pydantic import Field

from cookbook.envs.rubric import RubricEnvs, RubricGrader
from cookbook.recipes import SMOLLM2_RL
from cookbook.recipes.on_backend import frozen_completer, on_backend
from kitchen.engine.graph import Workflow
from kitchen.engine.recipe import Recipe
from kitchen.workflows.reinforcement import RLConfig, reinforcement
from kitchen.workflows.reinforcement.state import RLState


class RubricConfig(RLConfig):
    defaults: ClassVar[dict[str, Any]] = {
        **SMOLLM2_RL,
        "max_tokens": 16,
    }
    dataset: str = Field(
        "additions",
        description="additions (the cookbook's generator: 'What is x + y?', one rubric item) | "
        "a JSONL of datapoints {convo, rubric_items} (splits train, test)",
    )
    num_train: int = Field(10_000, ge=1, description="additions: training tasks")
    num_test: int = Field(1_000, ge=0, description="additions: held-out tasks")
    num_test_problems: int = Field(
        0, ge=0, description="Held-out tasks evaluated every eval_every steps (0 = none)"
    )
    format_coef: float = Field(
        0.1, ge=0, description="Reward lost by an answer without a clean stop"
    )
    grader_model: str | None = Field(
        None, description="The grader's base model (None: the policy's base model)"
    )
    grader_renderer: str | None = Field(
        None, description="The grader's renderer (None: its model's recommended one)"
    )
    grader_max_tokens: int = Field(64, ge=1, description="Tokens per grader reply")
    grader_timeout_s: float = Field(60.0, gt=0, description="Seconds per grader call")
    grader_retries: int = Field(1, ge=0, description="Retries of a failed grader call")
    grader_max_concurrency: int = Field(8, ge=1, description="Grader calls at once")
    grader_max_failures: int = Field(
        100, ge=0, description="Failed grades allowed per run before it stops"
    )


def open_grader(cfg: RubricConfig, backend: Any, policy_renderer: Any) -> RubricGrader:
    completer = frozen_completer(backend, policy_renderer, cfg.model_name, cfg.grader_model,
                                 cfg.grader_renderer, cfg.grader_max_tokens)  # fmt: skip
    return RubricGrader(completer, cfg.grader_timeout_s, cfg.grader_retries, 0.0,
                        cfg.grader_max_concurrency, cfg.grader_max_failures)  # fmt: skip


class Rubric(Recipe[RubricConfig]):
    """RL against a prompted LLM grader scoring rubric items (failures counted, bounded)."""

    name = "rubric"

    def workflow(self, cfg: RubricConfig) -> Workflow[RLState]:
        envs = RubricEnvs(
            cfg.groups_per_batch, cfg.group_size,
            partial(open_grader, cfg), cfg.dataset,
            cfg.num_train, cfg.num_test, cfg.num_test_problems, cfg.format_coef, cfg.seed,
        )  # fmt: skip
        return on_backend(reinforcement(cfg, envs, self.name))
