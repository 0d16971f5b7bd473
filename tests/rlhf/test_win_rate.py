"""Win rate against reference completions: the score formula, the stderr, and the evaluator."""

from __future__ import annotations

import asyncio
import math

import numpy as np
import pytest

from train_core.preference import Comparison
from train_core.preference.preference_model import ShorterIsBetter
from train_core.preference.win_rate import (
    ComparisonEvaluator,
    comparison_score,
    judge_against_reference,
    win_rate_stats,
)


@pytest.mark.parametrize("p0,p1", [(0.9, 0.2), (0.5, 0.5), (0.1, 0.95), (0.0, 1.0)])
def test_score_matches_tinker_cookbooks_formula(p0, p1):
    r0, r1 = 1 - 2 * p0, 1 - 2 * p1  # 0.6.1's preference scores in [-1, 1] (+1: B better)
    assert comparison_score(p0, p1) == pytest.approx((r0 - r1 + 2) / 4)


def test_one_way_score_is_the_probability_the_policy_wins():
    assert comparison_score(0.3, None) == pytest.approx(0.7)


def test_stats_are_mean_and_standard_error():
    scores = [1.0, 0.0, 0.5, 1.0, 0.75]
    mean, stderr = win_rate_stats(scores)
    assert mean == pytest.approx(sum(scores) / 5)
    direct = math.sqrt(sum((s - mean) ** 2 for s in scores) / 4) / math.sqrt(5)
    assert stderr == pytest.approx(direct)
    assert win_rate_stats([0.25]) == (0.25, 0.0)


class RecordingJudge:
    """ShorterIsBetter that remembers what it saw in each slot."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []

    async def __call__(self, comparison: Comparison) -> float:
        self.seen.append(
            (comparison.completion_A[0]["content"], comparison.completion_B[0]["content"])
        )
        return await ShorterIsBetter()(comparison)


def test_both_ways_judges_each_order_once():
    judge = RecordingJudge()
    c = Comparison([{"role": "user", "content": "q"}], [{"role": "assistant", "content": "long answer"}],
                   [{"role": "assistant", "content": "short"}])  # fmt: skip
    assert asyncio.run(judge_against_reference(judge, c)) == (0.0, 1.0)
    assert judge.seen == [("long answer", "short"), ("short", "long answer")]


class FixedAnswers:
    """A policy sampler answering `text` to every prompt (tokens are characters)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def sample(self, prompt, num_samples, sampling_params, **kwargs):
        from tinker import types

        tokens = [ord(ch) for ch in self.text]
        seq = types.SampledSequence(
            stop_reason="stop",
            sequence_id="s",
            _tokens_list=tokens,
            _logprobs_list=[0.0] * len(tokens),
        )
        return types.SampleResponse(sequences=[seq])


class CharRenderer:
    def build_generation_prompt(self, messages):
        from tinker import types

        return types.ModelInput.from_ints([1])

    def get_stop_sequences(self):
        return []

    def parse_response(self, tokens):
        return {"role": "assistant", "content": "".join(chr(t) for t in tokens)}, True


class Refs:
    def __init__(self, references: list[str]) -> None:
        self.comparisons = [
            Comparison(
                [{"role": "user", "content": f"q{i}"}], [{"role": "assistant", "content": r}], []
            )
            for i, r in enumerate(references)
        ]
        self.judge = ShorterIsBetter()
        self.renderer = CharRenderer()


def test_evaluator_win_rate_is_the_mean_score_against_each_reference():
    # the policy says "mid" (3 chars): it beats the 5-char reference, ties the 3-char one and
    # loses to the 1-char one -> scores 1, 0.5, 0
    metrics = asyncio.run(
        ComparisonEvaluator(max_tokens=8)(
            FixedAnswers("mid"), test_dataset=Refs(["longer", "abc", "x"])
        )
    )
    assert metrics["test/win_rate"] == pytest.approx(0.5)
    assert metrics["test/win_rate_stderr"] == pytest.approx(
        np.std([1, 0.5, 0], ddof=1) / np.sqrt(3)
    )
