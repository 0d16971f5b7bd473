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

from tinker import types

from train_core.futures import resolve_future
from train_core.preference.types import Comparison, LabeledComparison
from train_core.renderers.content import get_text_content
from train_core.renderers.types import Message

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


def answer_inputs(
    renderer: Any, comparison: Comparison
) -> tuple[types.ModelInput, types.ModelInput]:
    """The judge's prompt followed by each answer up to its first token that tells them apart, as
    the judge is trained to write them (tinker-cookbook cuts after the first trained token; the
    first differing token is the same one when "A" and "B" are single tokens, and still a
    decision when the renderer trains a shared separator first)."""
    convo = judge_conversation(comparison)
    tokens_A, tokens_B = (
        renderer.build_supervised_example([*convo, {"role": "assistant", "content": a}])[
            0
        ].to_ints()
        for a in ANSWERS
    )
    cut = next(
        (k for k, (a, b) in enumerate(zip(tokens_A, tokens_B, strict=False)) if a != b), None
    )
    if cut is None:
        raise ValueError(f"renderer {type(renderer).__name__} renders the answers A and B the same")
    return (types.ModelInput.from_ints(tokens_A[: cut + 1]),
            types.ModelInput.from_ints(tokens_B[: cut + 1]))  # fmt: skip


def prob_first(logprob_a: float, logprob_b: float) -> float:
    """softmax over the two answers: P(A) = 1 / (1 + exp(logp(B) - logp(A)))."""
    diff = logprob_b - logprob_a
    return 1.0 / (1.0 + math.exp(diff)) if diff < 700 else 0.0


def decided(p_a_better: float) -> float:
    """The judge's decision as tinker-cookbook's greedy judge makes it: 1 (A) or 0 (B); 0.5 tie."""
    return 1.0 if p_a_better > 0.5 else 0.0 if p_a_better < 0.5 else 0.5


@dataclass(frozen=True)
class GenerativePreferenceModel:
    """A judge on any sampler: `sampling_client.compute_logprobs` of its prompt plus each answer."""

    sampling_client: Any
    renderer: Any

    async def answer_logprobs(self, comparison: Comparison) -> tuple[float, float]:
        async def last_logprob(model_input: types.ModelInput) -> float:
            logprobs = await resolve_future(self.sampling_client.compute_logprobs(model_input))
            return float(logprobs[-1])

        inputs = answer_inputs(self.renderer, comparison)
        lp_a, lp_b = await asyncio.gather(*(last_logprob(x) for x in inputs))
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
