"""What a training client uses of the engine that made it (the backend): its settings, where
calls compute, and the samplers and model copies it makes. The client reads the engine through
this protocol alone, so the clients' room never imports the backend above it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from kitchen.adapters.local.clients.executor import Executor
    from kitchen.adapters.local.clients.sampling_client import LocalSamplingClient
    from kitchen.adapters.local.model.host import LoraSnapshot, ModelHost
    from kitchen.adapters.local.model.settings import EngineSettings
    from kitchen.adapters.local.sample.compute_thread import ComputeThread
    from kitchen.adapters.local.train.stability import StabilityRecords


class Engine(Protocol):
    """The backend as its training clients see it (backend.py's LocalBackend is one)."""

    settings: EngineSettings
    ranks: Executor  # where each call computes (executor.py)
    compute: ComputeThread  # the one thread every call runs on, in submission order
    stability: StabilityRecords  # what samplers recorded for stable_reinforce

    @property
    def dtype_name(self) -> str: ...

    def create_sampling_client(
        self, model_path: str | None = None, base_model: str | None = None
    ) -> LocalSamplingClient: ...

    def sampling_client_for(
        self, host: ModelHost, snapshot: LoraSnapshot | None, model_path: str | None = None
    ) -> LocalSamplingClient: ...

    def copy_host(self, host: ModelHost) -> ModelHost: ...

    def host_with(self, host: ModelHost, weights: dict[str, Any]) -> ModelHost: ...
