"""Sampling-based evaluation for label-style tasks: greedy answers to held-out prompts, parsed by
the renderer and compared with the reference answer (exact match), with macro precision / recall /
F1 over the reference labels."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from tinker import types

from train_core.evaluation.classification import classification_metrics
from train_core.evaluation.evaluator import ConversationsEvaluator
from train_core.futures import resolve_future


def content_text(content: Any) -> str:
    """A message's content as text: a string, or the text parts of a list of parts."""
    if isinstance(content, str):
        return content
    return "".join(p.get("text", "") for p in content if isinstance(p, dict))


def message_text(message: Any) -> str:
    return content_text(message.get("content", "")).strip()


def prompt_and_reference(messages: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], str]:
    """The conversation up to its last assistant message, and that message's text."""
    last = max(
        (i for i, m in enumerate(messages) if m["role"] == "assistant"), default=len(messages)
    )
    reference = content_text(messages[last]["content"]) if last < len(messages) else ""
    return messages[:last], reference


@dataclass(frozen=True, kw_only=True)
class LabelEvaluator(ConversationsEvaluator):
    """An Evaluator: greedy answers (sampling client) to the first `limit` held-out conversations,
    scored against each conversation's last assistant message: `{prefix}/accuracy`, macro
    precision / recall / F1, num_examples, frac_missing.

    `prefill` starts every answer (given in the prompt, as tinker-cookbook's vlm_classifier
    evaluator gives "The subject in this photo is:"); the label is what follows it, in the answer
    and in the reference alike."""

    max_tokens: int = 32
    limit: int | None = 64
    prefill: str = ""
    name: ClassVar[str] = "labels"

    async def evaluate(
        self, client: Any, conversations: Sequence[dict[str, Any]], renderer: Any
    ) -> dict[str, float]:
        items = conversations[: self.limit]
        if not items:  # limit=0 keeps none
            return {}
        params = types.SamplingParams(
            max_tokens=self.max_tokens, temperature=0.0, stop=renderer.get_stop_sequences()
        )
        cases = [prompt_and_reference(item["messages"]) for item in items]
        futures = [
            client.sample(
                renderer.build_generation_prompt(prompt, prefill=self.prefill or None), 1, params
            )
            for prompt, _ in cases
        ]
        predictions = []
        for future in futures:
            message, _ = renderer.parse_response((await resolve_future(future)).sequences[0].tokens)
            predictions.append(message_text(message))
        references = [ref.strip().removeprefix(self.prefill) for _, ref in cases]
        result = classification_metrics(predictions, references)
        return result.as_dict(f"{self.prefix}/")
