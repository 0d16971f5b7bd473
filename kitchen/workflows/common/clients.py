"""Opening a sampling client on fixed weights: the frozen reference of DPO or of a KL penalty, or
a teacher."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kitchen.engine.stage import Context, Metrics
from kitchen.workflows.common.naming import name_by_default


@dataclass(frozen=True, kw_only=True)
class OpenSamplingClient:
    """A sampling client on `base_model` with adapters off, into the state field `into`.

    With `initial_state_path` (e.g. the policy started from a checkpoint and the reference is
    those weights): a snapshot of the training client before its first step, or, on resume, a
    snapshot of a client loaded from that path (the live one has trained since).
    """

    base_model: str
    initial_state_path: str | None = None
    into: str = "reference_client"
    name: str = field(default="", repr=False)  # default: "open_<into>"
    ports: frozenset[str] = frozenset({"backend"})

    def __post_init__(self) -> None:
        name_by_default(self, f"open_{self.into}")

    @property
    def reads(self) -> frozenset[str]:
        return frozenset({"training_client"} if self.initial_state_path else ())

    @property
    def writes(self) -> frozenset[str]:
        return frozenset({self.into})

    def __call__(self, ctx: Context[Any]) -> Metrics | None:
        backend = ctx.require_backend()
        if self.initial_state_path is None:
            client = backend.create_sampling_client(base_model=self.base_model)
            ctx.logger.info("%s: %s (adapters off)", self.into, self.base_model)
        elif ctx.resume is None:
            client = ctx.state.training_client.save_weights_and_get_sampling_client()
            ctx.logger.info("%s: the initial weights from %s", self.into, self.initial_state_path)
        else:
            initial = backend.create_training_client_from_state(self.initial_state_path)
            client = initial.save_weights_and_get_sampling_client()
        setattr(ctx.state, self.into, client)
        return None
