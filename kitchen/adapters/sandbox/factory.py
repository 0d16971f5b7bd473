"""Pick a sandbox adapter by name: `local` (default, bubblewrap on this machine) or `http`
(a SandboxFusion service at SANDBOX_URL)."""

from __future__ import annotations

from kitchen.adapters.sandbox.bounded import BoundedSandbox
from kitchen.ports.sandbox import Limits, SandboxError

KINDS = ("local", "http")


def make_sandbox(
    kind: str = "local",
    *,
    url: str | None = None,
    max_concurrency: int | None = None,
    limits: Limits | None = None,
) -> BoundedSandbox:
    """Build (but do not start) a sandbox; nothing runs until the first `run`."""
    if kind == "local":
        from kitchen.adapters.sandbox.local import LocalSandbox

        if url is not None:
            raise SandboxError("sandbox url is only for the 'http' sandbox; this one is 'local'")
        return LocalSandbox(max_concurrency=max_concurrency, limits=limits)
    if kind == "http":
        from kitchen.adapters.sandbox.http import HttpSandbox

        return HttpSandbox(url, max_concurrency=max_concurrency, limits=limits)
    raise SandboxError(f"sandbox {kind!r} is unknown; expected one of {KINDS}")
