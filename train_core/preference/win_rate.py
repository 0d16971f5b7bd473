"""Win rate of a policy against reference completions, judged by a preference model
(tinker-cookbook's ComparisonEvaluator).

For each prompt the policy answers; the judge sees (reference, policy) and, with `both_ways`,
also (policy, reference). With p0 = P(reference better | reference in slot A) and
p1 = P(policy better | policy in slot A), the policy's score is (p1 - p0 + 1) / 2 in [0, 1]
(0.6.1's (r0 - r1 + 2) / 4 with r = 1 - 2p); one way it is 1 - p0. The win rate is the mean
score, its standard error std(ddof=1) / sqrt(n).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar, Protocol

import numpy as np

from train_core.completers import TinkerMessageCompleter
from train_core.evaluation.evaluator import EvaluatorClient
from train_core.preference.preference_model import PreferenceModel, decided
from train_core.preference.types import Comparison


def comparison_score(p_reference_first: float, p_policy_first: float | None) -> float:
    """The policy's score from the judge's P(slot A better) in each order (None: one way)."""
    if p_policy_first is None:
        return 1.0 - p_reference_first
    return (p_policy_first - p_reference_first + 1.0) / 2.0


def win_rate_stats(scores_N: Sequence[float]) -> tuple[float, float]:
    """(mean, standard error of the mean); the error is 0 for fewer than two scores."""
    scores = np.asarray(scores_N, dtype=np.float64)
    if scores.size == 0:
        raise ValueError("win rate of no comparisons")
    stderr = float(scores.std(ddof=1) / np.sqrt(scores.size)) if scores.size > 1 else 0.0
    return float(scores.mean()), stderr


class ReferenceSet(Protocol):
    """What a win rate is measured on: prompts with a reference completion in slot A, the judge,
    and the policy's renderer."""

    comparisons: Sequence[Comparison]
    judge: PreferenceModel
    renderer: Any


async def judge_against_reference(
    judge: PreferenceModel, comparison: Comparison, both_ways: bool = True
) -> tuple[float, float | None]:
    """(p0, p1): the judge's P(slot A better) with the reference (completion_A) first and, both
    ways, with the policy's completion_B first."""
    if not both_ways:
        return await judge(comparison), None
    p0, p1 = await asyncio.gather(judge(comparison), judge(comparison.swap()))
    return p0, p1


@dataclass(frozen=True, kw_only=True)
class ComparisonEvaluator:
    """An Evaluator (sampling client): the policy answers each reference prompt, the judge scores
    it against the reference. Keys: {prefix}/win_rate and {prefix}/win_rate_stderr from the
    judge's probabilities, {prefix}/decided_win_rate and its stderr from its decisions (each
    probability rounded to A or B, as a greedily sampled judge answers)."""

    max_tokens: int
    temperature: float = 0.0
    both_ways: bool = True
    prefix: str = "test"
    name: ClassVar[str] = "win_rate"
    client: ClassVar[EvaluatorClient] = "sampling"
    inputs: ClassVar[tuple[str, ...]] = ("test_dataset",)

    async def __call__(
        self, client: Any, /, *, test_dataset: ReferenceSet | None
    ) -> dict[str, float]:
        if test_dataset is None or not test_dataset.comparisons:
            return {}
        policy = TinkerMessageCompleter(
            client, test_dataset.renderer, self.max_tokens, temperature=self.temperature
        )

        async def judged(comparison: Comparison) -> tuple[float, float | None]:
            answer = await policy(comparison.prompt_conversation)
            mine = replace(comparison, completion_B=[answer])
            return await judge_against_reference(test_dataset.judge, mine, self.both_ways)

        judged_N = await asyncio.gather(*(judged(c) for c in test_dataset.comparisons))
        out: dict[str, float] = {}
        for key, rounding in (("win_rate", float), ("decided_win_rate", decided)):
            scores = [comparison_score(rounding(p0), None if p1 is None else rounding(p1))
                      for p0, p1 in judged_N]  # fmt: skip
            mean, stderr = win_rate_stats(scores)
            out |= {f"{self.prefix}/{key}": mean, f"{self.prefix}/{key}_stderr": stderr}
        return out
