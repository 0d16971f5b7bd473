"""A custom RL environment, a word-chain game, plugged into Kitchen's reinforcement workflow.

    python examples/word_game_rl.py                  # local engine, tiny model, 3 iterations
    python examples/word_game_rl.py --backend fake   # the test oracle: no model at all
    kitchen graph examples/word_game_rl.py           # print the plan without running it

The game: the env says a word; the player answers with a word that starts with its last letter.
A valid answer earns 1; an answer that is one bare word (and ends with the renderer's stop
sequence) avoids the 0.1 format penalty. `ProblemEnv` (tinker-cookbook's single-turn Q&A env)
does the token work: it renders the question with the run's renderer and parses the sample, so the
game is four small methods. `guess_number` in cookbook/envs is a multi-turn env, for comparison.

The reinforcement workflow needs only a factory: run context (renderer, tokenizer, dataset store)
-> (train dataset, test dataset or None). Each dataset batch is a list of EnvGroupBuilders; each
builder makes the `group_size` envs whose rewards GRPO compares.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial

import numpy as np

import kitchen
from kitchen import Workflow
from kitchen.workflows.reinforcement import RLConfig, reinforcement
from kitchen.workflows.reinforcement.state import RLState
from train_core import EnvGroupBuilder, ProblemEnv, ProblemGroupBuilder, Renderer, RLDataset
from train_core.rl.types import RLEnvContext

LEXICON = [
    "apple",
    "banana",
    "cherry",
    "date",
    "eagle",
    "fig",
    "grape",
    "honey",
    "igloo",
    "jelly",
    "kiwi",
    "lemon",
    "mango",
    "nut",
    "olive",
    "pear",
    "quince",
    "radish",
    "salt",
    "tomato",
    "umbrella",
    "vanilla",
    "walnut",
    "yam",
    "zucchini",
    "egg",
    "gravy",
    "leek",
    "trout",
    "tea",
    "oat",
    "rice",
    "yeast",
    "dill",
    "lime",
    "melon",
    "nectar",
    "onion",
    "plum",
]
_WORD = re.compile(r"[a-z]+")


def words(text: str) -> list[str]:
    """The alphabetic words of a reply, lower-cased."""
    return _WORD.findall(text.lower())


class WordChainEnv(ProblemEnv):
    """One turn of word chain from `word`."""

    def __init__(self, word: str, renderer: Renderer) -> None:
        super().__init__(renderer)
        self.word = word

    def get_question(self) -> str:
        return (
            f"Word chain! My word is '{self.word}'. Reply with one word that starts with the "
            f"letter '{self.word[-1]}'."
        )

    def check_answer(self, sample_str: str) -> bool:
        found = words(sample_str)
        return bool(found) and found[0][0] == self.word[-1] and found[0] != self.word

    def check_format(self, sample_str: str) -> bool:
        return len(sample_str.split()) == 1

    def get_reference_answer(self) -> str:
        return next(w for w in LEXICON if w[0] == self.word[-1] and w != self.word)


class WordChainDataset(RLDataset):
    """`n_batches` batches of `groups_per_batch` start words; batch i depends only on (seed, i),
    so a resumed run sees the same games."""

    def __init__(
        self,
        renderer: Renderer,
        groups_per_batch: int,
        group_size: int,
        n_batches: int,
        seed: int = 0,
    ) -> None:
        self.renderer, self.groups_per_batch, self.group_size = (
            renderer,
            groups_per_batch,
            group_size,
        )
        self.n_batches, self.seed = n_batches, seed

    def get_batch(self, index: int) -> Sequence[EnvGroupBuilder]:
        rng = np.random.default_rng([self.seed, index])
        starts = rng.choice(len(STARTS), size=self.groups_per_batch, replace=False)
        return [
            ProblemGroupBuilder(
                env_thunk=partial(WordChainEnv, STARTS[int(i)], self.renderer),
                num_envs=self.group_size,  # one GRPO group: the same start word, group_size tries
                dataset_name="word_chain",
            )
            for i in starts
        ]

    def __len__(self) -> int:
        return self.n_batches


# Start words whose last letter some lexicon word begins with, so every game has an answer.
STARTS = [w for w in LEXICON if any(v[0] == w[-1] and v != w for v in LEXICON)]


@dataclass(frozen=True)
class WordChainEnvs:
    """The dataset factory the workflow calls once the renderer exists: (train, test)."""

    groups_per_batch: int
    group_size: int
    n_batches: int

    def __call__(self, ctx: RLEnvContext) -> tuple[WordChainDataset, None]:
        return WordChainDataset(
            ctx.renderer, self.groups_per_batch, self.group_size, self.n_batches
        ), None


def config() -> RLConfig:
    """Sized for a CPU minute: 3 iterations of 4 groups x 4 games, 8 tokens per answer."""
    # model_validate rather than RLConfig(...): the fields declare defaults as Field(value, ...),
    # which type checkers do not read as defaults (pydantic checks the values either way).
    return RLConfig.model_validate(
        {
            "model_name": "kitchen/tiny-llama",
            "lora_rank": 8,
            "learning_rate": 1e-3,
            "group_size": 4,
            "groups_per_batch": 4,
            "num_batches": 3,
            "max_tokens": 8,
            "eval_every": 0,
            "save_every": 0,
            "register_model": False,  # a toy: keep it out of your model registry
        }
    )


def build_workflow() -> Workflow[RLState]:
    cfg = config()
    envs = WordChainEnvs(cfg.groups_per_batch, cfg.group_size, cfg.num_batches or 1)
    return reinforcement(cfg, envs)


def main(argv: list[str] | None = None) -> kitchen.RunResult:
    parser = argparse.ArgumentParser(description="Word-chain RL on the reinforcement workflow")
    parser.add_argument("--backend", default="local", help="local | fake | tinker")
    parser.add_argument("--log-dir", default="runs/examples/word_game_rl", help="run directory")
    args = parser.parse_args(argv)
    result = kitchen.run_workflow(
        build_workflow(), backend=args.backend, log_dir=args.log_dir, if_exists="delete"
    )
    for record in result.metrics:
        if "env/all/reward/total" in record:
            print(
                f"step {record['step']}: reward {record['env/all/reward/total']:.3f}, "
                f"correct {record['env/all/correct']:.2f}"
            )
    print(f"{result.steps} iterations; transcripts and metrics in {args.log_dir}")
    return result


if __name__ == "__main__":
    main()
