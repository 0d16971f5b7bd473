"""reverse-text as a verifiers 0.4 environment (`verifiers.v1`), on generated strings.

The Environments Hub's reverse-text (the env tinker-cookbook's verifiers_rl trains by default)
needs a download; this one generates its strings from a seed: a few words from a fixed list.
The model is asked to reverse the string character by character inside <reversed_text> tags;
the reward is the similarity ratio (difflib's longest-matching-blocks ratio, in [0, 1]) of its
answer to the reversed string. With `turns` 2 the env asks it once more to check its answer and
give it again: the second reply is scored, and the episode is one conversation of two calls.

Taskset id `kitchen-reverse-text` (verifiers imports a taskset id as a top-level module: this
module registers itself under that name when imported).
"""

from __future__ import annotations

import random
import re
import sys
from collections.abc import Iterator
from difflib import SequenceMatcher

import verifiers.v1 as vf
from pydantic import Field

TASKSET_ID = "kitchen-reverse-text"

SYSTEM_PROMPT = (
    "Reverse the given text character by character. "
    "Answer with the reversed text inside <reversed_text> and </reversed_text> tags."
)
CHECK_AGAIN = "Check your answer, then give the reversed text again inside the tags."

WORDS = [
    "apple",
    "river",
    "stone",
    "cloud",
    "paper",
    "garden",
    "window",
    "silver",
    "orange",
    "market",
    "candle",
    "forest",
    "bridge",
    "yellow",
    "rocket",
    "planet",
    "summer",
    "winter",
    "basket",
    "pencil",
    "coffee",
    "dragon",
    "guitar",
    "island",
    "jacket",
    "ladder",
    "mirror",
    "needle",
    "pocket",
    "rabbit",
]

_ANSWER = re.compile(r"<reversed_text>(.*?)</reversed_text>", re.DOTALL)


def answer_of(reply: str) -> str:
    """The text inside the reply's last <reversed_text> tags; the whole reply without them."""
    found = _ANSWER.findall(reply)
    return (found[-1] if found else reply).strip()


def similarity(answer: str, target: str) -> float:
    """difflib's ratio of the two strings: 2 * matched characters / total characters."""
    return SequenceMatcher(None, answer, target).ratio()


def generated_text(rng: random.Random, min_words: int, max_words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(min_words, max_words)))


class ReverseTextConfig(vf.TasksetConfig):
    seed: int = Field(0, description="Seed of the generated strings")
    min_words: int = Field(2, ge=1, description="Fewest words in a string")
    max_words: int = Field(4, ge=1, description="Most words in a string")
    turns: int = Field(1, ge=1, description="Replies per episode (after the first: check again)")


class ReverseTextData(vf.TaskData):
    text: str
    """The generated string; the target is its reverse."""


class ReverseTextTask(vf.Task[ReverseTextData, vf.State, vf.TaskConfig]):
    @vf.reward
    async def reversed_similarity(self, task: ReverseTextData, trace: vf.Trace) -> float:
        return similarity(answer_of(trace.last_reply), task.text[::-1])


class ReverseTextEnvConfig(vf.EnvConfig):
    agent: vf.AgentConfig = vf.AgentConfig()


class ReverseTextEnv(vf.Env[ReverseTextEnvConfig]):
    """One run of the task's prompt; with `turns` > 1, held open as an interaction in which the
    env, as the user, asks for the answer again after each reply."""

    async def run(self, task: vf.Task, agents: vf.Agents) -> None:
        turns = getattr(self.taskset.config, "turns", 1)
        if turns == 1:
            await agents.agent.run(task)
            return
        async with agents.agent.interaction(task) as interaction:
            segment = await interaction.turn()
            for _ in range(turns - 1):
                if segment.terminated:
                    break
                segment = await interaction.turn(CHECK_AGAIN)


class ReverseTextTaskset(vf.Taskset[ReverseTextTask, ReverseTextConfig]):
    INFINITE = True

    def load(self) -> Iterator[ReverseTextTask]:
        rng = random.Random(self.config.seed)
        low, high = sorted((self.config.min_words, self.config.max_words))
        i = 0
        while True:
            text = generated_text(rng, low, high)
            data = ReverseTextData(
                name=f"reverse-text#{i}", prompt=text, system_prompt=SYSTEM_PROMPT, text=text
            )
            yield ReverseTextTask(data, self.config.task)
            i += 1


__all__ = [
    "ReverseTextConfig",
    "ReverseTextData",
    "ReverseTextEnv",
    "ReverseTextEnvConfig",
    "ReverseTextTask",
    "ReverseTextTaskset",
]

sys.modules.setdefault(TASKSET_ID.replace("-", "_"), sys.modules[__name__])
