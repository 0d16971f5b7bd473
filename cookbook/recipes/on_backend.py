"""Env datasets that sample from a second model (twenty_questions' answerer, rubric's grader,
text_arena's base-model opponent) need the run's backend to open its sampling client. The RL
workflow builds its env dataset with `make(env_ctx)`; `on_backend` swaps that stage for one that
calls `make(env_ctx, backend)` with the run's backend, so these recipes stay the plain
reinforcement workflow (one run folder, the usual step count and registry record)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from kitchen.engine.graph import Workflow
from kitchen.engine.stage import Context, Metrics
from kitchen.workflows.reinforcement.stages import BuildRLDataset
from train_core.completers import TinkerMessageCompleter
from train_core.renderers import get_renderer
from train_core.renderers.by_name import resolve_renderer_name


@dataclass(frozen=True, kw_only=True)
class BuildRLDatasetOnBackend(BuildRLDataset):
    """BuildRLDataset whose factory also gets the run's backend: `make(env_ctx, backend)`."""

    ports: frozenset[str] = frozenset({"datasets", "backend"})

    async def __call__(self, ctx: Context[Any]) -> Metrics | None:
        make, backend = self.make, ctx.require_backend()
        return await BuildRLDataset.__call__(
            replace(self, make=lambda env: make(env, backend)), ctx
        )


def on_backend(workflow: Workflow[Any]) -> Workflow[Any]:
    """`workflow` with its BuildRLDataset handed the backend; exactly one must be there."""
    nodes = [
        BuildRLDatasetOnBackend(**{f: getattr(n, f) for f in ("make", "num_batches", "sandboxed")})
        if type(n) is BuildRLDataset
        else n
        for n in workflow.nodes
    ]
    swapped = sum(isinstance(n, BuildRLDatasetOnBackend) for n in nodes)
    if swapped != 1:
        raise TypeError(f"workflow {workflow.name}: {swapped} build_rl_dataset stages; expected 1")
    return replace(workflow, nodes=nodes)


def frozen_completer(
    backend: Any,
    policy_renderer: Any,
    policy_model: str,
    model: str | None,
    renderer: str | None,
    max_tokens: int,
) -> TinkerMessageCompleter:
    """A greedy message completer on a frozen base model: `model` (None: the policy's base) in
    `renderer` (None: its model's recommended one; the policy's own renderer when neither is set)."""
    base = model or policy_model
    client = backend.create_sampling_client(base_model=base)
    chat = policy_renderer
    if model is not None or renderer is not None:
        chat = get_renderer(resolve_renderer_name(base, renderer), client.get_tokenizer())
    return TinkerMessageCompleter(client, chat, max_tokens, temperature=0.0)
