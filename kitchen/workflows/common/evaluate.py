"""Sampling-based evaluation for label-style tasks: greedy answers to held-out prompts, parsed by
the renderer and compared with the reference answer (exact match), with macro precision / recall /
F1 over the reference labels."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tinker import types

from kitchen.engine.stage import Context, Metrics
from kitchen.workflows.common.sampling import message_text, prompt_and_reference


@dataclass(frozen=True)
class EvaluateLabels:
    source: str = "test_conversations"
    prefix: str = "test"
    max_tokens: int = 32
    limit: int | None = 64
    name: str = "evaluate_labels"
    writes: frozenset[str] = frozenset({"eval_results"})

    @property
    def reads(self) -> frozenset[str]:
        return frozenset({"training_client", "renderer", "eval_results", self.source})

    async def __call__(self, ctx: Context[Any]) -> Metrics | None:
        from train_core.evaluation.classification import classification_metrics

        items = (getattr(ctx.state, self.source) or [])[: self.limit]
        renderer = ctx.state.renderer
        sampler = ctx.state.training_client.save_weights_and_get_sampling_client()
        params = types.SamplingParams(
            max_tokens=self.max_tokens, temperature=0.0, stop=renderer.get_stop_sequences()
        )
        cases = [prompt_and_reference(item["messages"]) for item in items]
        futures = [
            sampler.sample(renderer.build_generation_prompt(prompt), 1, params)
            for prompt, _ in cases
        ]
        predictions = []
        for future in futures:
            message, _ = renderer.parse_response((await future).sequences[0].tokens)
            predictions.append(message_text(message))
        result = classification_metrics(predictions, [ref for _, ref in cases])
        metrics = result.as_dict(f"{self.prefix}/")
        ctx.state.eval_results = {**ctx.state.eval_results, **metrics}
        return {"step": ctx.state.step, **metrics}
