"""rubric: RL against a prompted LLM grader scoring each answer on rubric items, as
tinker-cookbook's recipes/rubric. The grader is a second sampling client on a frozen base model
(by default the policy's own base), or any OpenAI-compatible endpoint with `grader_base_url`
(cookbook/envs/openai_completer.py); its failures and timeouts are counted and bounded
(cookbook.envs.rubric), never a crashed step.

Locally: SmolLM2-135M-Instruct answers the cookbook's synthetic additions and grades them
(a weak grader: the run shows the plumbing, not a trained adder). `--preset cookbook`:
Qwen3.5-9B graded by Qwen3.6-35B-A3B through Tinker, 100 groups of 4, LR 1e-5.
"""

from __future__ import annotations

from functools import partial
from typing import Any, ClassVar

from pydantic import Field, model_validator

from cookbook.envs.openai_completer import OpenAIChatCompleter
from cookbook.envs.rubric import Grader, RubricEnvs, RubricGrader
from cookbook.recipes import SMOLLM2_RL
from cookbook.recipes.env_rl import EnvRL
from cookbook.recipes.on_backend import frozen_completer
from kitchen.workflows.reinforcement import RLConfig
from train_core.rl.types import RLDatasetFactory


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
        None,
        description="The grader's base model, or its model name at grader_base_url (None: the "
        "policy's base model)",
    )
    grader_base_url: str | None = Field(
        None,
        description="An OpenAI-compatible endpoint the grader calls (http://host:port/v1: "
        "kitchen serve, vLLM, a hosted API); None: a sampling client of the run's backend",
    )
    grader_api_key_env: str | None = Field(
        None,
        description="grader_base_url: the environment variable holding its API key (the key is "
        "read at start, never written); None: no key",
    )
    grader_renderer: str | None = Field(
        None,
        description="The grader's renderer (None: its model's recommended one); not with "
        "grader_base_url, whose server applies its own chat template",
    )
    grader_max_tokens: int = Field(64, ge=1, description="Tokens per grader reply")
    grader_timeout_s: float = Field(60.0, gt=0, description="Seconds per grader call")
    grader_retries: int = Field(1, ge=0, description="Retries of a failed grader call")
    grader_max_concurrency: int = Field(8, ge=1, description="Grader calls at once")
    grader_max_failures: int = Field(
        100, ge=0, description="Failed grades allowed per run before it stops"
    )

    @model_validator(mode="after")
    def _endpoint_renders_itself(self) -> RubricConfig:
        if self.grader_base_url is not None and self.grader_renderer is not None:
            raise ValueError(
                "grader_renderer is for a grader on the backend; the server at grader_base_url "
                "applies its own chat template"
            )
        if self.grader_api_key_env is not None and self.grader_base_url is None:
            raise ValueError("grader_api_key_env is the key of grader_base_url, which is not set")
        return self


def open_grader(cfg: RubricConfig, backend: Any, policy_renderer: Any) -> RubricGrader:
    completer: Grader
    if cfg.grader_base_url is not None:
        completer = OpenAIChatCompleter(cfg.grader_base_url, cfg.grader_model or cfg.model_name,
                                        cfg.grader_max_tokens, cfg.grader_timeout_s,
                                        cfg.grader_api_key_env)  # fmt: skip
    else:
        completer = frozen_completer(backend, policy_renderer, cfg.model_name, cfg.grader_model,
                                     cfg.grader_renderer, cfg.grader_max_tokens)  # fmt: skip
    return RubricGrader(completer, cfg.grader_timeout_s, cfg.grader_retries, 0.0,
                        cfg.grader_max_concurrency, cfg.grader_max_failures)  # fmt: skip


class Rubric(EnvRL[RubricConfig]):
    """RL against a prompted LLM grader scoring rubric items (failures counted, bounded)."""

    name = "rubric"
    samples_on_backend = True

    def envs(self, cfg: RubricConfig) -> RLDatasetFactory:
        return RubricEnvs(
            cfg.groups_per_batch, cfg.group_size,
            partial(open_grader, cfg), cfg.dataset,
            cfg.num_train, cfg.num_test, cfg.num_test_problems, cfg.format_coef, cfg.seed,
        )  # fmt: skip
