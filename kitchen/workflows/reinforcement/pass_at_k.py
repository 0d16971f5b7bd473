"""pass@k of the current sampler on a code benchmark (HumanEval in code_rl), graded in the run's
sandbox. The benchmark (problems, prompts, grading) is the `evaluator` the recipe passes in; the
unbiased pass@k estimator is train_core's."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from kitchen.engine.stage import Context, Metrics


@dataclass
class PassCounts:
    """Per problem: how many samples were drawn (n) and how many passed every test (c)."""

    num_samples_P: list[int]
    num_correct_P: list[int]
    metrics: dict[str, float] = field(default_factory=dict)
    """Extra numbers the benchmark reports (e.g. the fraction of answers with a code block)."""


CodeEvaluator = Callable[[Any, Any, Any], Awaitable[PassCounts]]
"""(sampling_client, renderer, sandbox) -> PassCounts."""


@dataclass(frozen=True, kw_only=True)
class EvaluatePassAtK:
    """`<prefix>/pass@k` for each k in `ks` no larger than the samples per problem, logged at the
    current step and stored in `eval_results` under `<result_key>/pass@k` (the model registry
    records them)."""

    evaluator: CodeEvaluator
    ks: tuple[int, ...] = (1,)
    prefix: str = "humaneval"
    result_key: str = "humaneval"
    name: str = "evaluate_pass_at_k"
    phase: ClassVar[str] = "evaluation"
    reads: frozenset[str] = frozenset({"sampling_client", "renderer", "sandbox", "eval_results"})
    writes: frozenset[str] = frozenset({"eval_results"})

    async def __call__(self, ctx: Context[Any]) -> Metrics | None:
        from train_core.evaluation.pass_at_k import pass_at_k

        state = ctx.state
        t0 = time.perf_counter()
        counts = await self.evaluator(state.sampling_client, state.renderer, state.sandbox)
        n_min = min(counts.num_samples_P)
        scores = {
            f"pass@{k}": pass_at_k(counts.num_samples_P, counts.num_correct_P, k)
            for k in self.ks
            if k <= n_min
        }
        metrics: Metrics = {f"{self.prefix}/{k}": v for k, v in scores.items()}
        metrics.update({f"{self.prefix}/{k}": v for k, v in counts.metrics.items()})
        metrics[f"{self.prefix}/num_problems"] = len(counts.num_samples_P)
        metrics[f"time/{self.prefix}"] = time.perf_counter() - t0
        results = {f"{self.result_key}/{k}": v for k, v in scores.items()}
        state.eval_results = {**state.eval_results, **results}
        ctx.logger.info(
            "%s: %s", self.result_key, ", ".join(f"{k} {v:.3f}" for k, v in scores.items())
        )
        return metrics


@dataclass(frozen=True)
class FirstStep:
    """Predicate: no training step has run yet (false on a resumed run past step 0)."""

    reads: frozenset[str] = frozenset({"step"})

    def __call__(self, state: Any) -> bool:
        return int(state.step) == 0

    def __str__(self) -> str:
        return "step == 0"
