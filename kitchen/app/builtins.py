"""Built-in adapters, registered by name. Factories import their heavy modules only when called, so
`kitchen --help` and `--dry-run` never load torch or transformers."""

from __future__ import annotations

from functools import partial
from typing import Any

from kitchen.engine.plugins import BACKENDS, DATASET_STORES, MODEL_REGISTRIES, SANDBOXES
from kitchen.ports import BackendSettings


@BACKENDS.register("fake")
def _fake(settings: BackendSettings) -> Any:
    from kitchen.adapters.fake import create_fake_backend

    return create_fake_backend(settings)


@BACKENDS.register("local")
def _local(settings: BackendSettings) -> Any:
    from kitchen.adapters.local import create_local_backend
    from kitchen.adapters.samplers import remote_samplers

    return create_local_backend(settings, remote_samplers(settings.extra))


@BACKENDS.register("tinker")
def _tinker(settings: BackendSettings) -> Any:
    from kitchen.adapters.tinker import create_tinker_backend

    return create_tinker_backend(settings)


@DATASET_STORES.register("hf")
def _hf(**kwargs: Any) -> Any:
    from kitchen.adapters.datasets import HFDatasetStore

    return HFDatasetStore(**kwargs)


def _sandbox(kind: str, **kwargs: Any) -> Any:
    from kitchen.adapters.sandbox import make_sandbox

    return make_sandbox(kind, **kwargs)


for _name in ("local", "http"):  # bubblewrap on this machine, or a SandboxFusion service
    SANDBOXES.add(_name, partial(_sandbox, _name))


@MODEL_REGISTRIES.register("default")
def _model_registry(spec: str | None = None) -> Any:
    """A SQLite file path, or mlflow:TRACKING_URI; None: $KITCHEN_REGISTRY or the user data dir."""
    from kitchen.adapters.model_registry import open_registry

    return open_registry(spec)
