"""Guess the number: a multi-turn env. The model guesses, the env answers "Higher." or "Lower.",
until the guess is right (reward 1) or `max_turns` guesses are spent (reward 0).

Written as a MessageEnv (messages in, messages out) and run through EnvFromMessageEnv, so the
token-level plumbing (rendering, parsing, stop sequences) is the shared adapter's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from cookbook.envs.arithmetic import extract_final_int
from cookbook.envs.synthetic import SeededBatches, SyntheticEnvs
from train_core.renderers.content import get_text_content
from train_core.renderers.types import Message
from train_core.rl.message_env import EnvFromMessageEnv, MessageEnv, MessageStepResult
from train_core.rl.types import Env, EnvGroupBuilder, Metrics, Trajectory


class GuessNumberEnv(MessageEnv):
    """One game: a secret in [low, high]; each turn one guess and a hint."""

    def __init__(self, secret: int, low: int = 1, high: int = 16, max_turns: int = 5) -> None:
        if not low <= secret <= high:
            raise ValueError(f"secret {secret} is outside [{low}, {high}]")
        self.secret, self.low, self.high, self.max_turns = secret, low, high, max_turns
        self.turns = 0
        self.messages: list[Message] = []

    def rules(self) -> str:
        return (
            f"I'm thinking of a whole number from {self.low} to {self.high}. Guess it! "
            f"Reply with just the number; I'll tell you if mine is higher or lower. "
            f"You have {self.max_turns} guesses."
        )

    async def initial_observation(self) -> list[Message]:
        self.messages = [{"role": "user", "content": self.rules()}]
        return list(self.messages)

    def hint(self, guess: int | None) -> str:
        """The env's reply to a guess (None: no number in the reply)."""
        if guess is None:
            return f"Please reply with just a number from {self.low} to {self.high}."
        return "Higher." if self.secret > guess else "Lower."

    async def step(self, message: Message) -> MessageStepResult:
        self.turns += 1
        guess = extract_final_int(get_text_content(message))
        self.messages.append({"role": "assistant", "content": get_text_content(message)})
        correct = guess == self.secret
        done = correct or self.turns >= self.max_turns
        metrics = {"correct": float(correct), "turns": float(self.turns)}
        if not done:
            self.messages.append({"role": "user", "content": self.hint(guess)})
        return MessageStepResult(
            reward=1.0 if correct else 0.0,
            episode_done=done,
            next_messages=list(self.messages),
            metrics=metrics,
            logs={"secret": self.secret, "guess": "none" if guess is None else guess},
        )


@dataclass(frozen=True)
class GuessNumberGroupBuilder(EnvGroupBuilder):
    """`num_envs` games with the same secret (a GRPO group)."""

    secret: int
    renderer: Any
    num_envs: int
    low: int = 1
    high: int = 16
    max_turns: int = 5

    async def make_envs(self) -> Sequence[Env]:
        return [
            EnvFromMessageEnv(
                self.renderer, GuessNumberEnv(self.secret, self.low, self.high, self.max_turns)
            )
            for _ in range(self.num_envs)
        ]

    async def compute_group_rewards(
        self, trajectory_group: list[Trajectory], env_group: Sequence[Env]
    ) -> list[tuple[float, Metrics]]:
        return [(0.0, {}) for _ in trajectory_group]

    def logging_tags(self) -> list[str]:
        return ["guess_number"]


@dataclass(eq=False)
class GuessNumberDataset(SeededBatches):
    """Secrets drawn per batch from (seed, stream, index)."""

    high: int = 16
    max_turns: int = 5

    def problems(self, rng: np.random.Generator) -> Sequence[EnvGroupBuilder]:
        secrets = rng.integers(1, self.high + 1, size=self.batch_size)
        return [
            GuessNumberGroupBuilder(
                int(s), self.renderer, self.group_size, high=self.high, max_turns=self.max_turns
            )
            for s in secrets
        ]


@dataclass(frozen=True)
class GuessNumberEnvs(SyntheticEnvs):
    """Builds the guess-the-number train set and a held-out test set."""

    high: int = 16
    max_turns: int = 5

    batches = GuessNumberDataset
