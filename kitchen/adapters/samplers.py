"""The samplers a local backend can hand out, by `--sampler` name: `local` is the engine's own,
`vllm` the vLLM servers (kitchen/adapters/vllm/), imported only when named."""

from __future__ import annotations

from typing import Any

from kitchen.adapters.local.remote_samplers import RemoteSamplersFactory
from kitchen.engine.errors import ConfigError

SAMPLERS = ("local", "vllm")


def remote_samplers(extra: dict[str, Any]) -> RemoteSamplersFactory | None:
    """What samples for a backend whose BackendSettings.extra is `extra`: None for the engine's
    own sampler, else the factory of the samplers `--sampler` names."""
    sampler = str(extra.get("sampler") or "local")
    if sampler == "local":
        return None
    if sampler == "vllm":
        from kitchen.adapters.vllm.samplers import for_local_engine

        return for_local_engine
    raise ConfigError(f"--sampler {sampler!r}: expected one of {', '.join(SAMPLERS)}")
