"""twenty_questions: multi-turn RL of a player asking yes/no questions about a secret word, as
tinker-cookbook's multiplayer_rl/twenty_questions. The answerer is a second sampling client on
a frozen base model (by default the policy's own base), or a scripted rule (`--answerer
scripted`, 'yes' when the question names the word; for tests and smoke runs).

Locally: SmolLM2-135M-Instruct as both player and answerer. `--preset cookbook`: Qwen3.5-4B as
the player and Qwen3.5-9B as the answerer through Tinker, 64 words of 8 games, LR 3e-5.
"""

from __future__ import annotations

from functools import partial
from typing import Any, ClassVar, Literal

from pydantic import Field

from cookbook.envs.twenty_questions import Answerer, ScriptedAnswerer, TwentyQuestionsEnvs
from cookbook.recipes import SMOLLM2_RL
from cookbook.recipes.env_rl import EnvRL
from cookbook.recipes.on_backend import frozen_completer
from kitchen.workflows.reinforcement import RLConfig
from train_core.rl.types import RLDatasetFactory


class TwentyQuestionsConfig(RLConfig):
    defaults: ClassVar[dict[str, Any]] = {
        **SMOLLM2_RL,
        "max_tokens": 20,
    }
    answerer: Literal["model", "scripted"] = Field(
        "model",
        description="model (a frozen base model samples the answers) | scripted ('yes' when the "
        "question names the word, else 'no')",
    )
    answerer_model: str | None = Field(
        None, description="model: the answerer's base model (None: the policy's base model)"
    )
    answerer_renderer: str | None = Field(
        None, description="model: the answerer's renderer (None: its model's recommended one)"
    )
    answerer_max_tokens: int = Field(5, ge=1, description="model: tokens per answer")
    num_epochs: int = Field(1, ge=1, description="Passes over the training words")
    num_test_words: int = Field(
        0, ge=0, le=100, description="Held-out words evaluated every eval_every steps (0 = none)"
    )
    test_group_size: int = Field(1, ge=1, description="Games per held-out word")


def open_answerer(cfg: TwentyQuestionsConfig, backend: Any, policy_renderer: Any) -> Answerer:
    if cfg.answerer == "scripted":
        return ScriptedAnswerer()
    return frozen_completer(backend, policy_renderer, cfg.model_name, cfg.answerer_model,
                            cfg.answerer_renderer, cfg.answerer_max_tokens)  # fmt: skip


class TwentyQuestions(EnvRL[TwentyQuestionsConfig]):
    """Multi-turn RL: ask yes/no questions, then guess the word (answerer: a model or a rule)."""

    name = "twenty_questions"
    samples_on_backend = True

    def envs(self, cfg: TwentyQuestionsConfig) -> RLDatasetFactory:
        return TwentyQuestionsEnvs(
            cfg.groups_per_batch, cfg.group_size,
            partial(open_answerer, cfg),
            cfg.num_epochs, cfg.num_test_words, cfg.test_group_size,
        )  # fmt: skip
