"""A tinker-cookbook-style Env, EnvGroupBuilder and RLDatasetBuilder, on the tinker SDK's own types,
run by Kitchen's minimal RL loop (tinker-cookbook's rl_loop).

    python examples/tinker_style_env.py                  # local engine, tiny model, 3 iterations
    python examples/tinker_style_env.py --backend fake   # the test oracle: no model at all
    kitchen graph examples/tinker_style_env.py           # print the plan without running it

Everything from `import tinker` down to `FruitDatasetBuilder` is written the way tinker-cookbook
0.6.1 writes envs: token-level observations as `tinker.ModelInput`, actions as token lists, a
group reward computed over the whole group, an async dataset builder. Kitchen's `train_core.rl`
has the same names and signatures, so porting an env means changing the import lines only:

    from train_core.rl.types import ...   <->   from tinker_cookbook.rl.types import ...
    from train_core.completers import ... <->   from tinker_cookbook.completers import ...
    from train_core import renderers      <->   from tinker_cookbook import renderers

The game: name a fruit starting with a given letter. The env prefills the answer with "Fruit:"
(a token-level edit of the prompt, with `tinker.EncodedTextChunk`). A known fruit with that letter
earns 1, any other word with that letter 0.2 (so an untrained model finds some signal), and the
group reward adds 0.5 to each correct answer no other member of the group gave.
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import tinker

import kitchen
from kitchen import Workflow
from kitchen.workflows.reinforcement import RLLoopConfig, reinforcement
from kitchen.workflows.reinforcement.state import RLState
from train_core import renderers
from train_core.completers import StopCondition
from train_core.rl.types import (
    Action,
    ActionExtra,
    Env,
    EnvGroupBuilder,
    Metrics,
    Observation,
    RLDataset,
    RLDatasetBuilder,
    RLEnvContext,
    StepResult,
    Trajectory,
)

FRUITS = {
    "apple", "apricot", "banana", "blueberry", "cherry", "date", "fig", "grape", "kiwi", "lemon",
    "lime", "mango", "melon", "orange", "papaya", "peach", "pear", "plum", "raspberry",
}  # fmt: skip
LETTERS = sorted({f[0] for f in FRUITS})


class FruitEnv(Env):
    """One attempt at naming a fruit that starts with `letter`."""

    def __init__(self, renderer: renderers.Renderer, letter: str) -> None:
        self.renderer = renderer
        self.letter = letter
        self.answer: str | None = None  # read by the group reward

    @property
    def stop_condition(self) -> StopCondition:
        return self.renderer.get_stop_sequences()

    async def initial_observation(self) -> tuple[Observation, StopCondition]:
        convo: list[renderers.Message] = [
            {"role": "user", "content": f"Name a fruit that starts with '{self.letter}'."}
        ]
        prompt = self.renderer.build_generation_prompt(convo)
        prefill = self.renderer.tokenizer.encode("Fruit:", add_special_tokens=False)
        return prompt.append(tinker.EncodedTextChunk(tokens=prefill)), self.stop_condition

    async def step(self, action: Action, *, extra: ActionExtra | None = None) -> StepResult:
        message, _ = self.renderer.parse_response(action)
        words = re.findall(r"[a-z]+", renderers.get_text_content(message).lower())
        self.answer = words[0] if words else None
        right_letter = self.answer is not None and self.answer[0] == self.letter
        correct = right_letter and self.answer in FRUITS
        return StepResult(
            reward=1.0 if correct else 0.2 if right_letter else 0.0,
            episode_done=True,
            next_observation=tinker.ModelInput.empty(),
            next_stop_condition=self.stop_condition,
            metrics={"correct": float(correct)},
            logs={"answer": self.answer or "-"},
        )


@dataclass(frozen=True)
class FruitGroupBuilder(EnvGroupBuilder):
    """`group_size` attempts at the same letter; a correct answer unique in the group earns 0.5."""

    renderer: renderers.Renderer
    letter: str
    group_size: int

    async def make_envs(self) -> Sequence[Env]:
        return [FruitEnv(self.renderer, self.letter) for _ in range(self.group_size)]

    async def compute_group_rewards(
        self, trajectory_group: list[Trajectory], env_group: Sequence[Env]
    ) -> list[tuple[float, Metrics]]:
        answers = [env.answer if isinstance(env, FruitEnv) else None for env in env_group]
        counts = Counter(answers)
        rewards: list[tuple[float, Metrics]] = []
        for answer, trajectory in zip(answers, trajectory_group, strict=True):
            correct = trajectory.transitions[-1].reward == 1.0
            unique = correct and counts[answer] == 1
            rewards.append((0.5 if unique else 0.0, {"unique": float(unique)}))
        return rewards

    def logging_tags(self) -> list[str]:
        return ["fruit"]


class FruitDataset(RLDataset):
    def __init__(
        self, renderer: renderers.Renderer, batch_size: int, group_size: int, n_batches: int
    ) -> None:
        self.renderer, self.batch_size = renderer, batch_size
        self.group_size, self.n_batches = group_size, n_batches

    def get_batch(self, index: int) -> Sequence[EnvGroupBuilder]:
        first = index * self.batch_size
        letters = [LETTERS[(first + i) % len(LETTERS)] for i in range(self.batch_size)]
        return [FruitGroupBuilder(self.renderer, letter, self.group_size) for letter in letters]

    def __len__(self) -> int:
        return self.n_batches


@dataclass(frozen=True)
class FruitDatasetBuilder(RLDatasetBuilder):
    """tinker-cookbook builds its datasets with an async builder (a `chz` class there)."""

    renderer: renderers.Renderer
    batch_size: int
    group_size: int
    n_batches: int

    async def __call__(self) -> tuple[RLDataset, RLDataset | None]:
        return FruitDataset(self.renderer, self.batch_size, self.group_size, self.n_batches), None


# ---- Kitchen from here on: a config and the factory that hands the run's renderer to the builder.


def config() -> RLLoopConfig:
    """Sized for a CPU minute: 3 iterations of 4 groups x 4 attempts, 6 tokens per answer."""
    # model_validate rather than RLLoopConfig(...): the fields declare defaults as Field(value, ...),
    # which type checkers do not read as defaults (pydantic checks the values either way).
    return RLLoopConfig.model_validate(
        {
            "model_name": "kitchen/tiny-llama",
            "lora_rank": 8,
            "learning_rate": 1e-3,
            "group_size": 4,
            "groups_per_batch": 4,
            "num_batches": 3,
            "max_tokens": 6,
            "save_every": 0,
            "register_model": False,  # a toy: keep it out of your model registry
        }
    )


def build_workflow() -> Workflow[RLState]:
    cfg = config()

    async def make_datasets(ctx: RLEnvContext) -> tuple[RLDataset, RLDataset | None]:
        builder = FruitDatasetBuilder(
            ctx.renderer, cfg.groups_per_batch, cfg.group_size, cfg.num_batches or 1
        )
        return await builder()

    return reinforcement(cfg, make_datasets)


def main(argv: list[str] | None = None) -> kitchen.RunResult:
    parser = argparse.ArgumentParser(description="A tinker-cookbook-style env on rl_loop")
    parser.add_argument("--backend", default="local", help="local | fake | tinker")
    parser.add_argument("--log-dir", default="runs/examples/tinker_style_env", help="run directory")
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
