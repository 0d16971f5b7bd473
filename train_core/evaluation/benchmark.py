"""A sampled benchmark: each problem answered `num_samples` times by a sampling client, each answer
graded against the reference, and pass@k over the problems (train_core/evaluation/pass_at_k.py),
as tinker-cookbook 0.6.1's benchmark evaluators report it. The problems and the grader come from
the caller (a data set and its answer format are the cookbook's business, not the math here)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from tinker import types

from train_core.evaluation.evaluator import EvaluatorClient
from train_core.evaluation.labels import message_text
from train_core.evaluation.pass_at_k import pass_at_k
from train_core.futures import resolve_future

# (the answer's text, the reference answer) -> correct
Grader = Callable[[str, str], bool]


@dataclass(frozen=True)
class BenchmarkProblem:
    """A prompt (chat messages up to the answer) and the reference answer it is graded against."""

    messages: list[dict[str, Any]]
    answer: str


@dataclass(frozen=True)
class BenchmarkTask:
    """A benchmark's problems and the grader of their answers."""

    problems: tuple[BenchmarkProblem, ...]
    grade: Grader


def pass_at_k_metrics(
    num_samples_P: Sequence[int], num_correct_P: Sequence[int], ks: Sequence[int], prefix: str
) -> dict[str, float]:
    """{prefix}/pass@k for each k, {prefix}/accuracy (the mean fraction correct) and
    {prefix}/num_problems."""
    out = {f"{prefix}/pass@{k}": pass_at_k(num_samples_P, num_correct_P, k) for k in ks}
    fractions_P = [c / n for n, c in zip(num_samples_P, num_correct_P, strict=True)]
    out[f"{prefix}/accuracy"] = sum(fractions_P) / len(fractions_P)
    out[f"{prefix}/num_problems"] = float(len(fractions_P))
    return out


async def count_correct(
    client: Any,
    renderer: Any,
    problems: Sequence[BenchmarkProblem],
    grade: Grader,
    *,
    num_samples: int,
    max_tokens: int,
    temperature: float,
) -> list[int]:
    """How many of `num_samples` answers to each problem `grade` accepts; all problems are
    submitted before any is awaited."""
    params = types.SamplingParams(
        max_tokens=max_tokens, temperature=temperature, stop=renderer.get_stop_sequences()
    )
    futures = [
        client.sample(renderer.build_generation_prompt(p.messages), num_samples, params)
        for p in problems
    ]
    correct_P = []
    for problem, future in zip(problems, futures, strict=True):
        response = await resolve_future(future)
        texts = [message_text(renderer.parse_response(s.tokens)[0]) for s in response.sequences]
        correct_P.append(sum(grade(text, problem.answer) for text in texts))
    return correct_P


@dataclass(frozen=True, kw_only=True)
class SampledPassAtK:
    """How a sampled benchmark is scored, shared by the evaluators that score one: `num_samples`
    answers a problem, `max_tokens` each at `temperature`, pass@k for each of `ks` (each k at most
    `num_samples`)."""

    num_samples: int = 1
    ks: tuple[int, ...] = (1,)
    max_tokens: int = 256
    temperature: float = 1.0
    name: ClassVar[str] = "benchmark"
    client: ClassVar[EvaluatorClient] = "sampling"

    @property
    def label(self) -> str:
        """The benchmark as a bad setting's message names it."""
        return "benchmark"

    def __post_init__(self) -> None:
        too_big = [k for k in self.ks if not 1 <= k <= self.num_samples]
        if too_big:
            raise ValueError(
                f"{self.label}: pass@{too_big[0]} needs 1 <= k <= num_samples ({self.num_samples})"
            )

    async def score(
        self, client: Any, renderer: Any, task: BenchmarkTask, prefix: str
    ) -> dict[str, float]:
        """pass@k of `task`'s problems under its grader, keys `{prefix}/pass@k`."""
        if not task.problems:
            return {}
        correct_P = await count_correct(
            client, renderer, task.problems, task.grade, num_samples=self.num_samples,
            max_tokens=self.max_tokens, temperature=self.temperature,
        )  # fmt: skip
        n_P = [self.num_samples] * len(correct_P)
        return pass_at_k_metrics(n_P, correct_P, self.ks, prefix)


@dataclass(frozen=True, kw_only=True)
class BenchmarkEvaluator(SampledPassAtK):
    """An Evaluator (sampling client): pass@k of `problems` under `grade`, keys
    `{prefix}/pass@k`."""

    problems: tuple[BenchmarkProblem, ...] = field(repr=False)
    grade: Grader = field(repr=False)
    prefix: str
    inputs: ClassVar[tuple[str, ...]] = ("renderer",)

    @property
    def label(self) -> str:
        return f"benchmark {self.prefix}"

    async def __call__(self, client: Any, /, *, renderer: Any) -> dict[str, float]:
        return await self.score(client, renderer, BenchmarkTask(self.problems, self.grade),
                                self.prefix)  # fmt: skip
