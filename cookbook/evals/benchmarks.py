"""The sampled benchmarks `kitchen eval --harness benchmark` runs (entry points
`kitchen.eval_tasks`), by name: gsm8k (word problems, numeric grading) and math500 (competition problems, math-verify
grading). Each reads a small bundled slice of the same row shape offline, or the hub set the
cookbook names with `source="hub"`; prompts are the math_rl envs' (few-shot example + suffix)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from cookbook.datasets.catalog import RowConverter, convert_rows, resolve_source
from cookbook.datasets.competition_math import hendrycks_math_row
from cookbook.datasets.math import gsm8k_row
from cookbook.envs import competition_math, math
from cookbook.envs.math_grading import GRADERS, extract_boxed
from kitchen.engine.errors import ConfigError
from kitchen.ports import DatasetStore
from train_core.evaluation.benchmark import BenchmarkProblem, BenchmarkTask, Grader

Source = Literal["bundled", "hub"]


@dataclass(frozen=True)
class Benchmark:
    """Where a benchmark's rows are (bundled and on the hub), how they read and grade."""

    bundled: tuple[str, str]  # (store source, split)
    hub: tuple[str, str]
    convert: RowConverter
    grader: str  # a name in cookbook.envs.math_grading.GRADERS
    suffix: str  # appended to each question, as the env's prompt


BENCHMARKS: dict[str, Benchmark] = {
    "gsm8k": Benchmark(("bundled:math", "test"), ("openai/gsm8k", "test"), gsm8k_row,
                       "numeric", math.QUESTION_SUFFIX),
    "math500": Benchmark(("bundled:math500", "test"), competition_math.MATH500, hendrycks_math_row,
                         "math_verify", competition_math.QUESTION_SUFFIX),
}  # fmt: skip


def benchmark(name: str) -> Benchmark:
    if name not in BENCHMARKS:
        raise ConfigError(f"benchmark {name!r}: expected one of {', '.join(sorted(BENCHMARKS))}")
    return BENCHMARKS[name]


def boxed_grader(name: str) -> Grader:
    """Grade the last \\boxed{} of an answer with grader `name`; no box is wrong."""
    compare = GRADERS[name]

    def grade(text: str, reference: str) -> bool:
        try:
            return compare(extract_boxed(text), reference)
        except ValueError:
            return False

    return grade


def load_problems(
    name: str, store: DatasetStore, source: Source = "bundled", limit: int | None = None
) -> list[BenchmarkProblem]:
    """The first `limit` problems of benchmark `name` from its bundled slice or the hub."""
    bench = benchmark(name)
    where, split = bench.bundled if source == "bundled" else bench.hub
    rows = convert_rows(store.load(resolve_source(where), split), bench.convert).rows[:limit]
    prefix: list[dict[str, Any]] = [
        dict(m) for m in math.MathEnv.standard_fewshot_prefix(bench.suffix)
    ]
    return [
        BenchmarkProblem([*prefix, {"role": "user", "content": row["question"] + bench.suffix}],
                         str(row["answer"]))
        for row in rows
    ]  # fmt: skip


def _task(name: str) -> Any:
    def load(store: DatasetStore, source: Source = "bundled", limit: int | None = None) -> Any:
        problems = tuple(load_problems(name, store, source, limit))
        return BenchmarkTask(problems, boxed_grader(benchmark(name).grader))

    load.__name__ = name
    return load


gsm8k = _task("gsm8k")
math500 = _task("math500")
