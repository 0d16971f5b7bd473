"""RL environments: arithmetic (synthetic, verifiable), GSM8K-style math with \\boxed{} grading,
competition math (MATH, MATH-500, DeepMath, Polaris) graded by math-verify, and multi-turn
guess-the-number; `env_dataset(cfg)` picks one from a recipe's env fields."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from cookbook.envs.arithmetic import ArithmeticEnv, ArithmeticEnvs
from cookbook.envs.competition_math import MATH_SETS, CompetitionMathEnvs
from cookbook.envs.guess_number import GuessNumberEnv, GuessNumberEnvs
from cookbook.envs.math import MathEnv, MathEnvs
from cookbook.envs.synthetic import SYNTHETIC_BATCHES
from train_core.rl.types import RLDatasetFactory

EnvName = Literal[
    "arithmetic",
    "math",
    "gsm8k",
    "hendrycks_math",
    "math500",
    "deepmath",
    "polaris",
    "guess_number",
]

__all__ = [
    "ArithmeticEnv",
    "ArithmeticEnvs",
    "CompetitionMathEnvs",
    "EnvName",
    "GuessNumberEnv",
    "GuessNumberEnvs",
    "MathEnv",
    "MathEnvs",
    "RLEnvFields",
    "env_dataset",
]


class RLEnvFields(BaseModel):
    """The env a recipe trains on (mixed into RL recipe configs)."""

    env: EnvName = Field(
        "arithmetic",
        description="arithmetic | math (GSM8K-style rows of `dataset`) | gsm8k (openai/gsm8k) | "
        "hendrycks_math (MATH, evaluated on MATH-500) | math500 | deepmath | polaris | guess_number",
    )
    math_source: Literal["hub", "bundled"] = Field(
        "hub",
        description="hendrycks_math, math500, deepmath, polaris: the hub datasets tinker-cookbook "
        "names (hub) or a few rows of each shipped offline (bundled)",
    )
    math_grader: Literal["auto", "numeric", "math_verify"] = Field(
        "auto",
        description="Answer grader: numeric (GSM8K numbers) | math_verify (LaTeX, symbolic); "
        "auto = numeric for math and gsm8k, math_verify for the competition envs",
    )
    dataset: str = Field(
        "bundled:math",
        description="math env: bundled:NAME | openai/gsm8k | a local JSONL of {question, answer}",
    )
    arithmetic_max_operand: int = Field(
        100, ge=1, description="arithmetic: operands drawn from 0..N (the difficulty knob)"
    )
    include_fewshot: bool = Field(True, description="Prefix one solved example to each prompt")
    guess_high: int = Field(16, ge=2, description="guess_number: the secret is in 1..N")
    guess_max_turns: int = Field(5, ge=1, description="guess_number: guesses allowed per game")
    num_test_problems: int = Field(
        32, ge=0, description="Held-out problems evaluated every eval_every steps (0 = none)"
    )


def env_dataset(
    cfg: RLEnvFields, groups_per_batch: int, group_size: int, num_batches: int | None, seed: int
) -> RLDatasetFactory:
    """The dataset factory of `cfg.env`. Synthetic envs make `num_batches` batches (default
    SYNTHETIC_BATCHES); data envs one pass over their rows."""
    synthetic = num_batches or SYNTHETIC_BATCHES
    if cfg.env == "arithmetic":
        return ArithmeticEnvs(
            groups_per_batch,
            group_size,
            synthetic,
            cfg.arithmetic_max_operand,
            cfg.include_fewshot,
            seed=seed,
            test_problems=cfg.num_test_problems,
        )
    if cfg.env == "guess_number":
        return GuessNumberEnvs(
            groups_per_batch,
            group_size,
            synthetic,
            cfg.guess_high,
            cfg.guess_max_turns,
            seed=seed,
            test_problems=cfg.num_test_problems,
        )
    if cfg.env in MATH_SETS:
        return CompetitionMathEnvs(
            cfg.env,
            groups_per_batch,
            group_size,
            cfg.math_source,
            "math_verify" if cfg.math_grader == "auto" else cfg.math_grader,
            cfg.include_fewshot,
            seed,
            test_problems=cfg.num_test_problems,
        )
    source = "openai/gsm8k" if cfg.env == "gsm8k" else cfg.dataset
    return MathEnvs(
        source,
        groups_per_batch,
        group_size,
        cfg.include_fewshot,
        seed,
        test_problems=cfg.num_test_problems,
        grader="numeric" if cfg.math_grader == "auto" else cfg.math_grader,
    )
