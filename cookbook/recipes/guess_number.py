"""guess_number: multi-turn RL on guessing a secret number from hints, as tinker-cookbook's
multiplayer_rl/guess_number.

Locally (the default): SmolLM2-135M-Instruct on the small game (1..16, 5 guesses, any reply's
last number). `--preset cookbook`: the cookbook's rules (a secret in 0..1024, 10 guesses, replies
`Guess: N`, a -1 format penalty for an unreadable reply) and its run values (Qwen3.5-4B through
Tinker, 32 groups of 8, LR 3e-5, 64 tokens).
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field, model_validator

from cookbook.envs.guess_number import GuessNumberEnvs, GuessRulesName
from cookbook.envs.synthetic import SYNTHETIC_BATCHES
from cookbook.recipes import SMOLLM2_RL
from cookbook.recipes.env_rl import EnvRL
from kitchen.workflows.reinforcement import RLConfig
from train_core.rl.types import RLDatasetFactory


class GuessNumberConfig(RLConfig):
    defaults: ClassVar[dict[str, Any]] = {
        **SMOLLM2_RL,
        "group_size": 8,
        "max_tokens": 8,
    }
    rules: GuessRulesName = Field(
        "hint",
        description="hint (any reply's last number; 'Higher.'/'Lower.') | cookbook ('Guess: N' "
        "only, 'Too low'/'Too high'/'Correct', an unreadable reply costs format_penalty -1)",
    )
    guess_low: int = Field(1, ge=0, description="The secret's lowest value")
    guess_high: int = Field(16, ge=1, description="The secret's highest value")
    guess_max_turns: int = Field(5, ge=1, description="Guesses per game")
    num_test_problems: int = Field(
        16, ge=0, description="Held-out games evaluated every eval_every steps (0 = none)"
    )

    @model_validator(mode="after")
    def _range(self) -> GuessNumberConfig:
        if self.guess_low >= self.guess_high:
            raise ValueError(
                f"guess_low {self.guess_low} must be below guess_high {self.guess_high}"
            )
        return self


class GuessNumber(EnvRL[GuessNumberConfig]):
    """Multi-turn RL: guess a secret number from hints (small game, or the cookbook's rules)."""

    name = "guess_number"

    def envs(self, cfg: GuessNumberConfig) -> RLDatasetFactory:
        return GuessNumberEnvs(
            cfg.groups_per_batch,
            cfg.group_size,
            cfg.num_batches or SYNTHETIC_BATCHES,
            cfg.guess_high,
            cfg.guess_max_turns,
            cfg.guess_low,
            cfg.rules,
            seed=cfg.seed,
            test_problems=cfg.num_test_problems,
        )
