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


# -- the backend and its models --------------------------------------------------------------------


@dataclass(frozen=True)
class OpenBackend(Command):
    """A backend of these settings; the models, clients and snapshots of any before it go."""

    settings: BackendSettings


@dataclass(frozen=True)
class LoadBase(Command):
    """The backend's shared copy of `base_model`, held as `quantization`, sharded."""

    base_model: str
    quantization: str


@dataclass(frozen=True)
class OpenClient(Command):
    """A training client: LoRA `lora` on the shared base, or full fine-tuning (`lora` None) of a
    sharded copy of its own."""

    model_id: str
    base_model: str
    lora: LoraSpec | None
    seed: int


@dataclass(frozen=True)
class CloseClient(Command):
    model_id: str


# -- a training client's calls (training_client.py: each rank's part of the same call) ----------


@dataclass(frozen=True)
class RunLoss(Command):
    """A forward (and, `backward`, a backward) of a built-in loss over `data`."""

    model_id: str
    data: list[types.Datum]
    loss_fn: str
    config: Mapping[str, float] | None
    backward: bool


@dataclass(frozen=True)
class ScoreData(Command):
    """The logprobs of a custom loss's forward over `data`."""

    model_id: str
    data: list[types.Datum]


@dataclass(frozen=True)
class Backprop(Command):
    """The backward of a custom loss: `grads` are its gradients with respect to the logprobs."""

    model_id: str
    data: list[types.Datum]
    grads: list[Any]


@dataclass(frozen=True)
class OptimStep(Command):
    model_id: str
    adam_params: types.AdamParams


@dataclass(frozen=True)
class SaveSharded(Command):
    """Write the sharded state into `folder` (rank 0's, not yet in place)."""

    model_id: str
    folder: str


@dataclass(frozen=True)
class LoadState(Command):
    model_id: str
    path: str
    with_optimizer: bool


@dataclass(frozen=True)
class GatherWeights(Command):
    """The whole weights of a sharded, fully fine-tuned model, gathered on rank 0."""

    model_id: str


# -- sampler snapshots ---------------------------------------------------------------------------


@dataclass(frozen=True)
class TakeSnapshot(Command):
    """This rank's copy of a training client's adapter weights, under rank 0's `snapshot_id`."""

    model_id: str
    snapshot_id: int


@dataclass(frozen=True)
class LoadSnapshot(Command):
    """An adapter saved in `folder`, on the shared base, under rank 0's `snapshot_id`."""

    folder: str
    snapshot_id: int
    base_model: str
    quantization: str


@dataclass(frozen=True)
class Forget(Command):
    """Snapshots rank 0 no longer holds."""

    snapshot_ids: tuple[int, ...]


# -- sampling and scoring on the sharded base -----------------------------------------------------


@dataclass(frozen=True)
class ShadowForward(Command):
    """A filler forward beside a forward of rank 0's decode batch."""

    base_model: str
    quantization: str


@dataclass(frozen=True)
class Decode(Command):
    """What each rank's share of a spread decode batch does next (`ops[rank - 1]`), with or
    without the forward of every rank."""

    base_model: str
    quantization: str
    snapshot_id: int | None
    merge: bool
    ops: list[list[Op]]
    forward: bool


@dataclass(frozen=True)
class Score(Command):
    """This rank's deal of a compute_logprobs batch."""

    base_model: str
    quantization: str
    snapshot_id: int | None
    merge: bool
    sequences: list[list[int] | Expanded]
    microbatch_tokens: int


@dataclass(frozen=True)
class Stop(Command):
    """Rank 0 is done: every rank leaves the group."""
