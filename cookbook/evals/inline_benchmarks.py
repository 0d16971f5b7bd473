"""The sampled benchmarks of `kitchen eval --harness benchmark` (gsm8k, math500: cookbook.evals.
benchmarks) run inline during training at their own cadence, as tinker-cookbook's inline evals:
`LoadBenchmarks` reads each benchmark's problems once through the dataset store (bundled slice
or hub) into the state field `benchmarks`; `InlineBenchmark` is the evaluator that scores one of
them, pass@k under `test/{name}/`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from cookbook.evals.benchmarks import BENCHMARKS, Source, boxed_grader, load_problems
from kitchen.engine.errors import ConfigError
from kitchen.engine.stage import Context, Metrics
from train_core.evaluation.benchmark import BenchmarkTask, SampledPassAtK


@dataclass(frozen=True, kw_only=True)
class LoadBenchmarks:
    """Each named benchmark's first `limit` problems and grader, into `benchmarks` by name."""

    names: tuple[str, ...]
    source: Source = "bundled"
    limit: int | None = None
    name: str = "load_benchmarks"
    reads: frozenset[str] = frozenset()
    writes: frozenset[str] = frozenset({"benchmarks"})
    ports: frozenset[str] = frozenset({"datasets"})

    def __post_init__(self) -> None:
        unknown = [n for n in self.names if n not in BENCHMARKS]
        if unknown:
            raise ConfigError(
                f"inline_benchmarks: unknown benchmark {unknown[0]!r}; expected one of "
                f"{', '.join(sorted(BENCHMARKS))}"
            )

    def __call__(self, ctx: Context[Any]) -> Metrics | None:
        store = ctx.port("datasets")
        ctx.state.benchmarks = {
            n: BenchmarkTask(
                tuple(load_problems(n, store, self.source, self.limit)),
                boxed_grader(BENCHMARKS[n].grader),
            )
            for n in self.names
        }
        return {f"test/{n}/num_problems": len(t.problems) for n, t in ctx.state.benchmarks.items()}


@dataclass(frozen=True, kw_only=True)
class InlineBenchmark(SampledPassAtK):
    """An Evaluator (sampling client): pass@k of benchmark `benchmark` from the state's
    `benchmarks`, `num_samples` answers a problem."""

    benchmark: str
    inputs: ClassVar[tuple[str, ...]] = ("renderer", "benchmarks")

    @property
    def label(self) -> str:
        return f"benchmark {self.benchmark}"

    async def __call__(
        self, client: Any, /, *, renderer: Any, benchmarks: dict[str, BenchmarkTask]
    ) -> dict[str, float]:
        return await self.score(client, renderer, benchmarks[self.benchmark],
                                f"test/{self.benchmark}")  # fmt: skip
