"""Preference models: (prompt, completion A, completion B) -> the probability that A is better.

The generative one is a chat model trained as a judge (tinker-cookbook's
PreferenceModelFromChatRenderer): the comparison is rendered as one conversation with
"==== Completion A/B ====" markers and the judge answers "A" or "B". Instead of sampling the
answer greedily it reads both answers' logprobs, so a judgement is a probability, not a coin:
P(A) = softmax(logp(A), logp(B))[0].
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
from tinker import types

from train_core.evaluation.evaluator import resolve_future
from train_core.preference.types import Comparison, LabeledComparison, Message
from train_core.renderers.content import get_text_content

ANSWERS = ("A", "B")


class PreferenceModel(Protocol):
    async def __call__(self, comparison: Comparison) -> float:
        """The probability in [0, 1] that completion A is better than completion B."""
        ...


def judge_conversation(comparison: Comparison) -> list[Message]:
    """The judge's prompt: the conversation, then each completion under a marker."""
    return [
        *comparison.prompt_conversation,
        {"role": "system", "content": "==== Completion A ===="},
        *comparison.completion_A,
        {"role": "system", "content": "==== Completion B ===="},
        *comparison.completion_B,
        {"role": "system", "content": "==== Preference ===="},
    ]


def judge_example(labeled: LabeledComparison) -> list[Message]:
    """The judge's training conversation: its prompt, then the preferred side as its answer."""
    if labeled.label == "Tie":
        raise ValueError("a Tie gives the judge no answer to learn")
    return [
        *judge_conversation(labeled.comparison),
        {"role": "assistant", "content": labeled.label},
    ]


def answer_input(renderer: Any, comparison: Comparison, answer: str) -> types.ModelInput:
    """Judge prompt plus the first token of `answer`, as the judge is trained to produce it (the
    renderer's supervised example cut after its first trained token, as tinker-cookbook's
    ComparisonRendererFromChatRenderer does)."""
    convo = [*judge_conversation(comparison), {"role": "assistant", "content": answer}]
    model_input, weights_T = renderer.build_supervised_example(convo)
    trained = np.flatnonzero(np.asarray(weights_T) > 0)
    if trained.size == 0:
        raise ValueError(f"renderer {type(renderer).__name__} trains no token of the answer")
    return types.ModelInput.from_ints(model_input.to_ints()[: int(trained[0]) + 1])


def prob_first(logprob_a: float, logprob_b: float) -> float:
    """softmax over the two answers: P(A) = 1 / (1 + exp(logp(B) - logp(A)))."""
    diff = logprob_b - logprob_a
    return 1.0 / (1.0 + math.exp(diff)) if diff < 700 else 0.0


@dataclass(frozen=True)
class GenerativePreferenceModel:
    """A judge on any sampler: `sampling_client.compute_logprobs` of its prompt plus each answer."""

    sampling_client: Any
    renderer: Any

    async def answer_logprobs(self, comparison: Comparison) -> tuple[float, float]:
        async def last_logprob(answer: str) -> float:
            model_input = answer_input(self.renderer, comparison, answer)
            logprobs = await resolve_future(self.sampling_client.compute_logprobs(model_input))
            return float(logprobs[-1])

        lp_a, lp_b = await asyncio.gather(*(last_logprob(a) for a in ANSWERS))
        return lp_a, lp_b

    async def __call__(self, comparison: Comparison) -> float:
        return prob_first(*await self.answer_logprobs(comparison))


@dataclass(frozen=True)
class ShorterIsBetter:
    """A rule for tests and demos: the completion with fewer characters wins; equal is a tie."""

    async def __call__(self, comparison: Comparison) -> float:
        def length(messages: list[Message]) -> int:
            return sum(len(get_text_content(m)) for m in messages)

        a, b = length(comparison.completion_A), length(comparison.completion_B)
        return 1.0 if a < b else 0.0 if a > b else 0.5
