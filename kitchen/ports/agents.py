"""The agent gateway as a workflow sees it: an OpenAI client per rollout address, the calls recorded
under each address, and the model name `policy` moved to new weights after each optim step.

Implemented in kitchen/serve (in-process, and over HTTP where the run opened a port); a workflow
reaches it as the run's port "agents".
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from train_core.agents import CallRecord

POLICY_MODEL = "policy"
"""The model name that means "the current weights" on every route of the gateway."""

ROLLOUT_HEADER = "X-Kitchen-Rollout"
"""The header that addresses a call to a rollout (the path prefix /rollouts/<address> does too)."""


@runtime_checkable
class AgentGateway(Protocol):
    def client(self, address: str) -> Any:
        """An `openai.AsyncOpenAI` whose calls are recorded under `address`; no HTTP."""
        ...

    def base_url(self, address: str) -> str | None:
        """The URL an out-of-process agent points its OpenAI client at for `address`
        (…/rollouts/<address>/v1), or None when the gateway listens on no port."""
        ...

    def set_policy(self, sampling_client: Any, version: int, base_model: str | None = None) -> None:
        """From now on `policy` samples with these weights; a snapshot no call holds any more is
        released. `base_model`: the model the weights are of, where the client does not tell it
        (its chat format follows it)."""
        ...

    def take(self, address: str) -> list[CallRecord]:
        """The address's calls, in order, removed from the record: a finished rollout's calls."""
        ...

    def live_snapshots(self) -> int:
        """Sampler snapshots held now: the current policy and those calls still run on."""
        ...
