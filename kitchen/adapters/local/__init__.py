"""The embedded local training engine (torch + transformers + peft), CPU or GPU.

Importing this package is cheap: torch and transformers load only when a backend is created or a
model resolved. Public entry points:

    create_local_backend(settings, remote_samplers) -> LocalBackend    the `--backend local` factory
    resolve_model(name) -> Path                         model name -> local transformers folder
    kitchen_cache_dir() -> Path                         where converted / generated models live

Checkpoint paths the engine returns are plain absolute folder paths (see `checkpoints.py`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kitchen.adapters.local.model.locate import kitchen_cache_dir, resolve_model

if TYPE_CHECKING:
    from kitchen.adapters.local.backend import LocalBackend
    from kitchen.adapters.local.remote_samplers import RemoteSamplersFactory
    from kitchen.ports import BackendSettings

__all__ = ["LocalBackend", "create_local_backend", "kitchen_cache_dir", "resolve_model"]


def create_local_backend(
    settings: BackendSettings, remote_samplers: RemoteSamplersFactory | None = None
) -> LocalBackend:
    """The local engine for `settings` (imports torch on first call); `remote_samplers`: who
    samples instead of the engine (kitchen/adapters/samplers.py)."""
    from kitchen.adapters.local.backend import LocalBackend

    return LocalBackend(settings, remote_samplers)


def __getattr__(name: str) -> Any:
    if name == "LocalBackend":
        from kitchen.adapters.local.backend import LocalBackend

        return LocalBackend
    raise AttributeError(name)
