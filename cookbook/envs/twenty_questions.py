"""Twenty questions, as tinker-cookbook 0.6.1's multiplayer_rl/twenty_questions: the policy is
the player, asking yes/no questions about a secret word; an answerer (a second model, or a
scripted rule in tests) replies; a line `Guess: <word>` at the start of a reply that names the
word wins (reward 1). The game ends on a right guess or after 20 questions (reward 0).

The answerer sees only its system prompt (with the secret) and the player's last question, so
each answer is independent of the earlier ones, as in the cookbook. It is any MessageCompleter:
`(messages) -> assistant message`, e.g. TinkerMessageCompleter over a sampling client of any
base model (the recipe opens one), or ScriptedAnswerer.

Words: cookbook/data/twenty_questions_words.txt (common concrete nouns), shuffled with seed 0;
the last fifth (at most 100) is the test set.
"""

from __future__ import annotations

import random
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from importlib import resources
from typing import Any

from cookbook.envs.message_group import MessageEnvGroupBuilder
from cookbook.envs.problem_rows import ItemBatches
from cookbook.envs.reply_values import captured
from train_core.renderers.content import get_text_content
from train_core.renderers.types import Message
from train_core.rl.message_env import MessageEnv, MessageStepResult
from train_core.rl.types import RLEnvContext

Answerer = Callable[[list[Message]], Awaitable[Message]]
MAX_QUESTIONS = 20

PLAYER_PROMPT = (
    "We are playing twenty questions. I have a secret word in mind: a single common noun. Ask me "
    "yes/no questions about it, one short question (under 20 words) per message, and I will "
    "answer yes or no. When you think you know it, write a line 'Guess: <word>' (no angle "
    "brackets, no article). You win if you guess it within 20 questions."
)
ANSWERER_PROMPT = (
    "You are answering questions in a game of twenty questions. Your secret word is {word}. "
    "Reply with exactly 'yes' or 'no' and nothing else. If the player writes 'Guess: <word>', "
    "reply 'yes' only if it is exactly your secret word."
)


def read_guess(text: str) -> str | None:
    """The word of a `Guess: <word>` at the start of the reply, if any."""
    return captured(re.match(r"Guess: (.*)", text), str.strip)


def load_words() -> list[str]:
    text = (resources.files("cookbook.data") / "twenty_questions_words.txt").read_text()
    words = [w.strip() for w in text.splitlines() if w.strip()]
    random.Random(0).shuffle(words)
    return words


def split_words(words: Sequence[str]) -> tuple[list[str], list[str]]:
    n_test = min(len(words) // 5, 100)
    return list(words[:-n_test]), list(words[-n_test:])


@dataclass
class ScriptedAnswerer:
    """A rule instead of a model: 'yes' when the question names the secret word (read from the
    system prompt), else 'no'. Records what it was shown."""

    seen: list[list[Message]] = field(default_factory=list)

    async def __call__(self, messages: list[Message]) -> Message:
        self.seen.append(list(messages))
        word = get_text_content(messages[0]).split("Your secret word is ")[1].split(".")[0]
        question = get_text_content(messages[-1]).lower()
        said = "yes" if re.search(rf"\b{re.escape(word.lower())}\b", question) else "no"
        return {"role": "assistant", "content": said}


class TwentyQuestionsEnv(MessageEnv):
    """One game on `word`; see the module doc."""

    def __init__(self, word: str, answerer: Answerer, max_questions: int = MAX_QUESTIONS) -> None:
        self.word, self.answerer, self.max_questions = word, answerer, max_questions
        self.messages: list[Message] = [{"role": "system", "content": PLAYER_PROMPT}]
        self.questions = 0

    async def initial_observation(self) -> list[Message]:
        return list(self.messages)

    async def step(self, message: Message) -> MessageStepResult:
        self.questions += 1
        text = get_text_content(message)
        self.messages.append({"role": "assistant", "content": text})
        guess = read_guess(text)
        won = guess is not None and guess.lower() == self.word.lower()
        done = won or self.questions >= self.max_questions
        if not done:
            secret: Message = {"role": "system", "content": ANSWERER_PROMPT.format(word=self.word)}
            reply = await self.answerer([secret, {"role": "user", "content": text}])
            self.messages.append({"role": "user", "content": get_text_content(reply)})
        return MessageStepResult(
            reward=float(won),
            episode_done=done,
            next_messages=list(self.messages),
            metrics={
                "won": float(won),
                "questions": float(self.questions),
                "guessed": float(guess is not None),
            },
            logs={"word": self.word, "asked": text[:500]},
        )


@dataclass(frozen=True)
class TwentyQuestionsEnvs:
    """RLDatasetFactory: the train words `num_epochs` times over, and (unless `test_words` is 0)
    the first `test_words` test words in one batch of `test_group_size` games each.
    `open_answerer(backend, policy_renderer)` makes the answerer once, when the dataset is built."""

    groups_per_batch: int
    group_size: int
    open_answerer: Callable[[Any, Any], Answerer] = field(repr=False)
    num_epochs: int = 1
    test_words: int = 0
    test_group_size: int = 1

    def __call__(self, ctx: RLEnvContext, backend: Any = None) -> tuple[ItemBatches[str], Any]:
        answerer = self.open_answerer(backend, ctx.renderer)
        train_words, test_words = split_words(load_words())

        def games(size: int) -> Callable[[str], MessageEnvGroupBuilder]:
            return lambda word: MessageEnvGroupBuilder(
                partial(TwentyQuestionsEnv, word, answerer), ctx.renderer, size, "twenty_questions"
            )

        train = ItemBatches(train_words * self.num_epochs, self.groups_per_batch,
                            games(self.group_size), whole_batches=True)  # fmt: skip
        if not self.test_words:
            return train, None
        held = test_words[: self.test_words]
        return train, ItemBatches(held, len(held), games(self.test_group_size), whole_batches=True)
