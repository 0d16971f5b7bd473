"""What rank 0 of a --nproc N run sends the other ranks: one frozen dataclass per kind of call, so
that the sender builds the same fields the receiver reads (worker.py's handler table, keyed by
type) and mypy checks both ends. Every field is picklable: a command travels whole."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Mapping

    from tinker import types

    from kitchen.adapters.local.model.images import Expanded
    from kitchen.adapters.local.model.lora import LoraSpec
    from kitchen.adapters.local.sample.decode_batch import Op
    from kitchen.ports import BackendSettings


@dataclass(frozen=True)
class Command:
    """One call of rank 0's that every other rank runs its part of."""


@dataclass(frozen=True)
class ClientCall(Command):
    """A call of training client `model_id`."""

    model_id: str


@dataclass(frozen=True)
class BaseCall(Command):
    """A call on the backend's shared copy of `base_model`, held as `quantization`, sharded."""

    base_model: str
    quantization: str


@dataclass(frozen=True)
class WeightsCall(BaseCall):
    """A call on the shared base with snapshot `snapshot_id`'s weights (None: the base's),
    merged if rank 0's were (`merge`)."""

    snapshot_id: int | None
    merge: bool


# -- the backend and its models --------------------------------------------------------------------


@dataclass(frozen=True)
class OpenBackend(Command):
    """A backend of these settings; the models, clients and snapshots of any before it go."""

    settings: BackendSettings


@dataclass(frozen=True)
class LoadBase(BaseCall):
    """Load the shared base."""


@dataclass(frozen=True)
class OpenClient(ClientCall):
    """A training client: LoRA `lora` on the shared base, or full fine-tuning (`lora` None) of a
    sharded copy of its own."""

    base_model: str
    lora: LoraSpec | None
    seed: int


@dataclass(frozen=True)
class CloseClient(ClientCall):
    pass


# -- a training client's calls (training_client.py: each rank's part of the same call) ----------


@dataclass(frozen=True)
class RunLoss(ClientCall):
    """A forward (and, `backward`, a backward) of a built-in loss over `data`."""

    data: list[types.Datum]
    loss_fn: str
    config: Mapping[str, float] | None
    backward: bool


@dataclass(frozen=True)
class ScoreData(ClientCall):
    """The logprobs of a custom loss's forward over `data`."""

    data: list[types.Datum]


@dataclass(frozen=True)
class Backprop(ClientCall):
    """The backward of a custom loss: `grads` are its gradients with respect to the logprobs."""

    data: list[types.Datum]
    grads: list[Any]


@dataclass(frozen=True)
class OptimStep(ClientCall):
    adam_params: types.AdamParams


@dataclass(frozen=True)
class SaveSharded(ClientCall):
    """Write the sharded state into `folder` (rank 0's, not yet in place)."""

    folder: str


@dataclass(frozen=True)
class LoadState(ClientCall):
    path: str
    with_optimizer: bool


@dataclass(frozen=True)
class GatherWeights(ClientCall):
    """The whole weights of a sharded, fully fine-tuned model, gathered on rank 0."""


# -- sampler snapshots ---------------------------------------------------------------------------


@dataclass(frozen=True)
class TakeSnapshot(ClientCall):
    """This rank's copy of a training client's adapter weights, under rank 0's `snapshot_id`."""

    snapshot_id: int


@dataclass(frozen=True)
class LoadSnapshot(BaseCall):
    """An adapter saved in `folder`, on the shared base, under rank 0's `snapshot_id`."""

    folder: str
    snapshot_id: int


@dataclass(frozen=True)
class Forget(Command):
    """Snapshots rank 0 no longer holds."""

    snapshot_ids: tuple[int, ...]


# -- sampling and scoring on the sharded base -----------------------------------------------------


@dataclass(frozen=True)
class ShadowForward(BaseCall):
    """A filler forward beside a forward of rank 0's decode batch."""


@dataclass(frozen=True)
class Decode(WeightsCall):
    """What each rank's share of a spread decode batch does next (`ops[rank - 1]`), with or
    without the forward of every rank."""

    ops: list[list[Op]]
    forward: bool


@dataclass(frozen=True)
class Score(WeightsCall):
    """This rank's deal of a compute_logprobs batch."""

    sequences: list[list[int] | Expanded]
    microbatch_tokens: int


@dataclass(frozen=True)
class Stop(Command):
    """Rank 0 is done: every rank leaves the group."""
