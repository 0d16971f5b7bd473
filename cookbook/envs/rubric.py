"""Rubric-graded RL, as tinker-cookbook 0.6.1's recipes/rubric: the policy answers a
conversation once; a prompted grader (any MessageCompleter: a sampling client of another model,
`kitchen serve`, Tinker) scores the answer against each rubric item, the items concurrently (at
most `max_concurrency` calls at once); reward = mean item score + format_coef * (clean_stop - 1).

A grader failure is counted, never a crashed step: a call that raises or runs past `timeout_s`
is retried `retries` times, then the item scores `failure_score` (metric `grader/failed`); a
reply without a readable score scores 0 (metric `grader/unreadable`), as the cookbook's. Past
`max_failures` failed items in a run the grader is broken, not flaky, and the run stops.

Tasks: the cookbook's synthetic additions (a solved example, then "What is x + y?", one rubric
item asking for the sum), or JSONL rows in the cookbook's datapoint shape ({"convo": [...],
"rubric_items": [{"rubric_str", "extraction_regex", "grader_output_format_instruction"}]}).
"""

from __future__ import annotations

import asyncio
import random
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tinker import types

from cookbook.envs.problem_rows import ItemBatches
from cookbook.envs.reply_values import captured
from kitchen.engine.errors import DataError, StageError
from train_core.completers import RendererLike, termination_flags
from train_core.renderers.content import get_text_content
from train_core.renderers.types import Message
from train_core.rl.types import (
    Action,
    ActionExtra,
    Env,
    EnvGroupBuilder,
    Observation,
    RLEnvContext,
    StepResult,
)

Grader = Callable[[list[Message]], Awaitable[Message]]
SCORE_TAGS = r"<score>(.*?)</score>"


@dataclass(frozen=True)
class RubricItem:
    """One criterion, how the grader is told to write its score, and how it is read back."""

    rubric_str: str
    extraction_regex: str = SCORE_TAGS
    grader_output_format_instruction: str = (
        "Please output your score between 0 and 1 wrapped in <score> ... </score>"
    )

    def grader_prompt(self, convo: Sequence[Message]) -> list[Message]:
        """One user message: the context, the completion to grade (the last message), the rubric,
        and the score format (the cookbook's layout)."""
        *context, completion = convo
        speaker = {"user": "Human", "system": "Human"}
        flat = "\n\n".join(f"{speaker.get(m['role'], 'Chatbot')}: {get_text_content(m)}"
                           for m in context)  # fmt: skip
        text = "\n".join([
            "I will show you a conversation context, a chatbot completion to grade, and a rubric.",
            "Please grade the chatbot's completion based on the rubric.", "",
            "<context>", flat or "(No prior context)", "</context>", "",
            "<completion_to_grade>", f"Chatbot: {get_text_content(completion)}",
            "</completion_to_grade>", "", "<rubric>", self.rubric_str, "</rubric>", "",
            "Please grade the chatbot's completion based on the rubric. "
            f"{self.grader_output_format_instruction}",
        ])  # fmt: skip
        return [{"role": "user", "content": text}]

    def extract_score(self, reply: str) -> float | None:
        return captured(re.search(self.extraction_regex, reply, re.DOTALL), float)


@dataclass(frozen=True)
class RubricTask:
    convo: tuple[Message, ...]
    items: tuple[RubricItem, ...]


class GraderBroken(StageError):
    """More grader calls failed in this run than `max_failures` allows."""


@dataclass
class RubricGrader:
    """Scores one answer against rubric items; see the module doc. Counters are per run."""

    grader: Grader
    timeout_s: float | None = 60.0
    retries: int = 1
    failure_score: float = 0.0
    max_concurrency: int = 8
    max_failures: int | None = 100
    failures: int = 0
    last_error: str | None = None  # the latest failed call's error, named when the run stops
    _slots: asyncio.Semaphore | None = field(default=None, init=False, repr=False)

    async def _ask(self, prompt: list[Message]) -> str:
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.max_concurrency)
        async with self._slots, asyncio.timeout(self.timeout_s):
            return get_text_content(await self.grader(prompt))

    async def score(self, convo: Sequence[Message], item: RubricItem) -> tuple[float, str]:
        """(score, outcome): outcome is "graded", "unreadable" or "failed"."""
        prompt = item.grader_prompt(convo)
        for _ in range(self.retries + 1):
            try:
                reply = await self._ask(prompt)
            except Exception as e:  # a grader error or timeout is counted, not raised
                self.last_error = f"{type(e).__name__}: {e}"[:300] if str(e) else type(e).__name__
                continue
            value = item.extract_score(reply)
            return (0.0, "unreadable") if value is None else (value, "graded")
        self.failures += 1
        if self.max_failures is not None and self.failures > self.max_failures:
            raise GraderBroken(
                f"rubric grader failed {self.failures} times in this run (max_failures "
                f"{self.max_failures}): check the grader's endpoint and timeout_s {self.timeout_s}"
                f"; the last failure: {self.last_error}"
            )
        return self.failure_score, "failed"

    async def __call__(self, convo: Sequence[Message], items: Sequence[RubricItem]) -> tuple[float, dict[str, float]]:  # fmt: skip
        """The mean item score and the counts of unreadable and failed items."""
        results = await asyncio.gather(*(self.score(convo, i) for i in items))
        outcomes = [o for _, o in results]
        return sum(s for s, _ in results) / len(results), {
            "grader/unreadable": float(outcomes.count("unreadable")),
            "grader/failed": float(outcomes.count("failed")),
        }


class RubricEnv(Env):
    """One answer to `task.convo`, graded by `grader` against `task.items`."""

    def __init__(self, task: RubricTask, renderer: RendererLike, grader: RubricGrader,
                 format_coef: float = 0.1) -> None:  # fmt: skip
        self.task, self.renderer, self.grader, self.format_coef = (
            task,
            renderer,
            grader,
            format_coef,
        )

    async def initial_observation(self) -> tuple[Observation, Any]:
        prompt = self.renderer.build_generation_prompt(list(self.task.convo))
        return prompt, self.renderer.get_stop_sequences()

    async def step(self, action: Action, *, extra: ActionExtra | None = None) -> StepResult:
        message, termination = self.renderer.parse_response(action)
        clean_stop = float(termination_flags(termination)[1])
        answer: Message = {"role": "assistant", "content": get_text_content(message)}
        mean, counts = await self.grader([*self.task.convo, answer], self.task.items)
        return StepResult(
            reward=mean + self.format_coef * (clean_stop - 1.0),
            episode_done=True,
            next_observation=types.ModelInput.empty(),
            next_stop_condition=self.renderer.get_stop_sequences(),
            metrics={"format": clean_stop, "rubric_score": mean, **counts},
        )


@dataclass(frozen=True)
class RubricGroupBuilder(EnvGroupBuilder):
    task: RubricTask
    renderer: Any
    grader: RubricGrader
    group_size: int
    format_coef: float = 0.1

    async def make_envs(self) -> Sequence[Env]:
        return [RubricEnv(self.task, self.renderer, self.grader, self.format_coef)
                for _ in range(self.group_size)]  # fmt: skip

    def logging_tags(self) -> list[str]:
        return ["rubric"]


def addition_tasks(n: int, rng: random.Random) -> list[RubricTask]:
    """The cookbook's synthetic data: a solved 4 + 5, then x + y for x, y in 0..1000, graded by
    one rubric item naming the sum."""
    tasks = []
    for _ in range(n):
        x, y = rng.randint(0, 1000), rng.randint(0, 1000)
        convo: tuple[Message, ...] = (
            {"role": "user", "content": "What is 4 + 5?"},
            {"role": "assistant", "content": "9"},
            {"role": "user", "content": f"What is {x} + {y}?"},
        )
        item = RubricItem(f"Does the chatbot correctly get the answer {x + y}?")
        tasks.append(RubricTask(convo, (item,)))
    return tasks


def rubric_task(row: Mapping[str, Any], where: str) -> RubricTask:
    convo, items = row.get("convo"), row.get("rubric_items")
    if not isinstance(convo, list) or not convo:
        raise DataError(f"{where}: field convo must be a non-empty list of messages")
    if not isinstance(items, list) or not items:
        raise DataError(f"{where}: field rubric_items must be a non-empty list")
    try:
        parsed = tuple(RubricItem(**item) for item in items)
    except TypeError as e:
        raise DataError(f"{where}: rubric_items: {e}") from None
    return RubricTask(tuple(convo), parsed)


@dataclass(frozen=True)
class RubricEnvs:
    """RLDatasetFactory: `dataset` "additions" (the cookbook's generator, `num_train` +
    `num_test` tasks from `seed`) or a JSONL/hub source of datapoints (splits train, test).
    `open_grader(backend, policy_renderer)` makes the grader once, when the dataset is built."""

    groups_per_batch: int
    group_size: int
    open_grader: Callable[[Any, Any], RubricGrader] = field(repr=False)
    dataset: str = "additions"
    num_train: int = 10_000
    num_test: int = 1_000
    test_problems: int = 0
    format_coef: float = 0.1
    seed: int = 42

    def tasks(self, store: Any) -> tuple[list[RubricTask], list[RubricTask]]:
        if self.dataset == "additions":
            every = addition_tasks(self.num_train + self.num_test, random.Random(self.seed))
            return every[: self.num_train], every[self.num_train :]
        if store is None:
            raise DataError(f"rubric dataset {self.dataset}: no dataset store configured")
        split: dict[str, list[RubricTask]] = {}
        for name in ("train", "test") if self.test_problems else ("train",):
            rows = store.load(self.dataset, name)
            where = getattr(rows, "where", lambda i, n=name: f"{self.dataset} ({n}) row {i}")
            split[name] = [rubric_task(r, where(i)) for i, r in enumerate(rows)]
        return split["train"], split.get("test", [])

    def __call__(
        self, ctx: RLEnvContext, backend: Any = None
    ) -> tuple[ItemBatches[RubricTask], ItemBatches[RubricTask] | None]:
        grader = self.open_grader(backend, ctx.renderer)
        train_tasks, test_tasks = self.tasks(ctx.datasets)

        def groups(size: int) -> Callable[[RubricTask], RubricGroupBuilder]:
            return lambda t: RubricGroupBuilder(t, ctx.renderer, grader, size, self.format_coef)

        train = ItemBatches(train_tasks, self.groups_per_batch, groups(self.group_size))
        held = test_tasks[: self.test_problems]
        if not held:
            return train, None
        return train, ItemBatches(held, len(held), groups(1))
