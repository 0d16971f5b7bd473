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
