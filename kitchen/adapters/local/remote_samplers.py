"""The seam of `--sampler vllm`: samplers that run outside the engine, handed to the backend by
whoever builds it (kitchen/adapters/samplers.py picks them by name), so the engine never imports
them and a run on its own sampler loads none of their code."""

from __future__ import annotations

from collections.abc import Callable, Collection
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from kitchen.adapters.local.backend import LocalBackend
    from kitchen.adapters.local.clients.sampling_client import LocalSamplingClient
    from kitchen.adapters.local.model.host import LoraSnapshot, ModelHost


class RemoteSamplers(Protocol):
    """Another engine's samplers over the local engine's weights (the trainer stays local)."""

    def check_trainable(self, lora_rank: int, model_path: Path) -> None:
        """Refuse, before anything loads, a LoRA r (`lora_rank`; 0: full fine-tuning) it cannot
        sample."""

    def start(self, host: ModelHost, max_lora_rank: int) -> None:
        """Start serving `host`'s base, without waiting (the trainer loads meanwhile)."""

    def base(self, host: ModelHost) -> Any:
        """The servers of `host`'s base, ready."""

    def sampling_client(
        self,
        host: ModelHost,
        snapshot: LoraSnapshot | None,
        model_path: str | None,
        eos_ids: Collection[int],
        scorer: LocalSamplingClient,
    ) -> Any:
        """A client sampling the base (`snapshot` None) or a snapshot; `scorer` scores prompts."""

    def close(self) -> None:
        """Stop what was started."""


# Made once, on the first use, from the backend that holds the weights and settings.
RemoteSamplersFactory = Callable[["LocalBackend"], RemoteSamplers]
