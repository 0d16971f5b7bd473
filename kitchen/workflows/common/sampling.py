"""Before/after samples: what the model answers on a few held-out prompts, shown at the end."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, ClassVar

from tinker import types

from kitchen.engine.stage import Context, Metrics, SourceToInto
from kitchen.workflows.common.images import readable_input
from train_core.evaluation.labels import content_text, prompt_and_reference


@dataclass(frozen=True, kw_only=True)
class SamplePrompts(SourceToInto):
    """Greedy answers from the current weights to the first `n` conversations of `source`; a
    prompt's images are saved in the run directory and listed by path (common/images.py)."""

    into: str
    n: int = 3
    max_tokens: int = 64
    temperature: float = 0.0
    source: str = "test_conversations"
    name: str = "sample_prompts"
    needs: ClassVar[frozenset[str]] = frozenset({"training_client", "renderer"})

    async def __call__(self, ctx: Context[Any]) -> Metrics | None:
        items = (getattr(ctx.state, self.source) or [])[: self.n]
        renderer = ctx.state.renderer
        sampler = ctx.state.training_client.save_weights_and_get_sampling_client()
        params = types.SamplingParams(
            max_tokens=self.max_tokens,
            temperature=self.temperature,
            stop=renderer.get_stop_sequences(),
        )
        out = []
        for item in items:
            prompt_messages, reference = prompt_and_reference(item["messages"])
            prompt = renderer.build_generation_prompt(prompt_messages)
            response = await sampler.sample(prompt, 1, params)
            message, _ = renderer.parse_response(response.sequences[0].tokens)
            _, images = readable_input(renderer.tokenizer, prompt, ctx.log_dir)
            sample = {
                "prompt": content_text(prompt_messages[-1]["content"]) if prompt_messages else "",
                "reference": reference,
                "answer": content_text(message["content"]),
            }
            out.append({**sample, "images": images} if images else sample)
        setattr(ctx.state, self.into, out)
        return None


@dataclass(frozen=True, kw_only=True)
class ShowSamples:
    """Print before/after answers side by side and keep them in samples.jsonl."""

    name: str = "show_samples"
    reads: frozenset[str] = frozenset({"samples_before", "samples_after"})
    writes: frozenset[str] = frozenset()

    def __call__(self, ctx: Context[Any]) -> Metrics | None:
        from rich.console import Console
        from rich.table import Table

        before, after = ctx.state.samples_before or [], ctx.state.samples_after or []
        table = Table(
            "prompt",
            "before training",
            "after training",
            "reference",
            title="samples",
            show_lines=True,
        )
        rows = [
            {
                "prompt": b["prompt"],
                "before": b["answer"],
                "after": a["answer"],
                "reference": b["reference"],
                **({"images": b["images"]} if b.get("images") else {}),
            }
            for b, a in zip(before, after, strict=False)
        ]
        for r in rows:
            table.add_row(r["prompt"], r["before"], r["after"], r["reference"])
        Console().print(table)
        if ctx.log_dir is not None:
            with (ctx.log_dir / "samples.jsonl").open("w") as f:
                for r in rows:
                    f.write(json.dumps(r) + "\n")
        return None
