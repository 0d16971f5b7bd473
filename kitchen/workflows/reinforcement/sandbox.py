"""The code sandbox as a run resource: opened before anything that builds envs on it, closed in
`finally_` (also after an error), so code RL is the RL workflow plus this resource."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from kitchen.engine.stage import Context, Metrics


@dataclass(frozen=True, kw_only=True)
class OpenSandbox:
    """The code sandbox (`local`: bubblewrap jails here; `http`: a SandboxFusion service). With
    `check`, one trivial program runs at once, so a machine that cannot sandbox fails at the
    start rather than in the middle of the first rollout."""

    kind: str = "local"
    url: str | None = None
    max_concurrency: int | None = None
    check: bool = True
    name: str = "open_sandbox"
    reads: frozenset[str] = frozenset()
    writes: frozenset[str] = frozenset({"sandbox"})

    async def __call__(self, ctx: Context[Any]) -> Metrics | None:
        from kitchen.engine.plugins import SANDBOXES

        sandbox = SANDBOXES.get(self.kind)(url=self.url, max_concurrency=self.max_concurrency)
        ctx.state.sandbox = sandbox
        check = getattr(sandbox, "check", None)
        if self.check and check is not None:
            await asyncio.to_thread(check)
        ctx.logger.info("sandbox %s (%d at a time)", self.kind, sandbox.max_concurrency)
        return None


@dataclass(frozen=True, kw_only=True)
class CloseSandbox:
    """Stop the sandbox's worker threads (runs in flight finish first)."""

    name: str = "close_sandbox"
    reads: frozenset[str] = frozenset({"sandbox"})
    writes: frozenset[str] = frozenset({"sandbox"})

    def __call__(self, ctx: Context[Any]) -> Metrics | None:
        sandbox = ctx.state.sandbox
        if sandbox is not None and hasattr(sandbox, "close"):
            sandbox.close()
        ctx.state.sandbox = None
        return None
