"""Guess the number: a multi-turn env. The model guesses, the env answers with a hint, until the
guess is right (reward 1) or `max_turns` guesses are spent. Two rule sets, a value of
GUESS_RULES:

- `hint` (the default, small enough for a laptop): a secret in 1..16, 5 guesses, any reply's
  last integer is its guess, hints "Higher." / "Lower.", an unreadable reply earns 0.
- `cookbook` (tinker-cookbook 0.6.1's multiplayer_rl/guess_number): a system prompt, a secret in
  0..1024, 10 guesses, a guess only as `Guess: N` at the start of the reply, feedback "Too low" /
  "Too high" / "Correct", and an unreadable reply costs the format penalty (-1) and a turn.

Written as a MessageEnv (messages in, messages out) and run through EnvFromMessageEnv, so the
token-level plumbing (rendering, parsing, stop sequences) is the shared adapter's.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Literal

import numpy as np

from cookbook.envs.arithmetic import extract_final_int
from cookbook.envs.message_group import MessageEnvGroupBuilder
from cookbook.envs.reply_values import captured
from cookbook.envs.synthetic import SyntheticEnvs
from train_core.completers import RendererLike
from train_core.renderers.content import get_text_content
from train_core.renderers.types import Message
from train_core.rl.message_env import MessageEnv, MessageStepResult
from train_core.rl.types import EnvGroupBuilder

GuessRulesName = Literal["hint", "cookbook"]


def _cookbook_guess(text: str) -> int | None:
    return captured(re.match(r"Guess: (.*)", text), int)


@dataclass(frozen=True)
class GuessRules:
    """How a game is told and read; the numbers (low, high, turns) are the env's."""

    parse: Callable[[str], int | None]
    system_prompt: str | None
    """None: the rules open the first user message instead."""
    rules: str
    unreadable: str
    unreadable_reward: float
    too_low: str
    too_high: str
    correct: str | None
    """Said after a right guess (None: nothing, the episode just ends)."""


GUESS_RULES: dict[GuessRulesName, GuessRules] = {
    "hint": GuessRules(
        parse=extract_final_int,
        system_prompt=None,
        rules="I'm thinking of a whole number from {low} to {high}. Guess it! Reply with just the "
        "number; I'll tell you if mine is higher or lower. You have {max_turns} guesses.",
        unreadable="Please reply with just a number from {low} to {high}.",
        unreadable_reward=0.0,
        too_low="Higher.",
        too_high="Lower.",
        correct=None,
    ),
    "cookbook": GuessRules(
        parse=_cookbook_guess,
        system_prompt="Your job is to guess a integer between {low} and {high}. You can output "
        "your guess with the format Guess: <guess> (without the angle brackets), and say nothing "
        "else. Then we will tell you whether you guess is too high, too low, or correct.",
        rules="",
        unreadable="Failed to parse. Please output in the format Guess: <guess> (without the angle "
        "brackets), and say nothing else.",
        unreadable_reward=-1.0,
        too_low="Too low",
        too_high="Too high",
        correct="Correct",
    ),
}


class GuessNumberEnv(MessageEnv):
    """One game: a secret in [low, high]; each turn one guess and the rules' answer."""

    def __init__(
        self,
        secret: int,
        low: int = 1,
        high: int = 16,
        max_turns: int = 5,
        rules: GuessRulesName = "hint",
    ) -> None:
        if not low <= secret <= high:
            raise ValueError(f"secret {secret} is outside [{low}, {high}]")
        self.secret, self.low, self.high, self.max_turns = secret, low, high, max_turns
        self.game = GUESS_RULES[rules]
        self.turns = 0
        self.messages: list[Message] = []

    def _fill(self, text: str) -> str:
        return text.format(low=self.low, high=self.high, max_turns=self.max_turns)

    def rules(self) -> str:
        return self._fill(self.game.rules)

    async def initial_observation(self) -> list[Message]:
        system = self.game.system_prompt
        if system is None:
            self.messages = [{"role": "user", "content": self.rules()}]
        else:
            self.messages = [{"role": "system", "content": self._fill(system)}]
        return list(self.messages)

    def hint(self, guess: int | None) -> str:
        """The env's reply to a wrong or unreadable guess (None: no guess in the reply)."""
        if guess is None:
            return self._fill(self.game.unreadable)
        return self.game.too_low if self.secret > guess else self.game.too_high

    async def step(self, message: Message) -> MessageStepResult:
        self.turns += 1
        text = get_text_content(message)
        guess = self.game.parse(text)
        self.messages.append({"role": "assistant", "content": text})
        correct = guess == self.secret
        done = correct or self.turns >= self.max_turns
        metrics = {"correct": float(correct), "turns": float(self.turns)}
        reply = self.game.correct if correct else self.hint(guess)
        if reply is not None and (not done or self.game.correct is not None):
            self.messages.append({"role": "user", "content": reply})
        reward = 1.0 if correct else self.game.unreadable_reward if guess is None else 0.0
        if self.game.unreadable_reward:
            metrics["format"] = float(guess is not None)
        return MessageStepResult(
            reward=reward,
            episode_done=done,
            next_messages=list(self.messages),
            metrics=metrics,
            logs={"secret": self.secret, "guess": "none" if guess is None else guess},
        )


@dataclass(frozen=True)
class GuessNumberEnvs(SyntheticEnvs):
    """Builds the guess-the-number train set and a held-out test set: each group `group_size`
    games with the same secret, drawn per batch from (seed, stream, index)."""

    high: int = 16
    max_turns: int = 5
    low: int = 1
    rules: GuessRulesName = "hint"

    def problems(
        self, rng: np.random.Generator, renderer: RendererLike, batch_size: int, group_size: int
    ) -> Sequence[EnvGroupBuilder]:
        secrets = rng.integers(self.low, self.high + 1, size=batch_size)
        return [
            MessageEnvGroupBuilder(
                partial(GuessNumberEnv, int(s), self.low, self.high, self.max_turns, self.rules),
                renderer,
                group_size,
                "guess_number",
            )
            for s in secrets
        ]
