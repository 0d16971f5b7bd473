"""What ranks > 0 of a --nproc N run do instead of the recipe: take each engine call rank 0 sends
(world.py) and run this rank's part of it, until rank 0 says stop."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from kitchen.adapters.local.distributed.commands import (
    Backprop,
    CloseClient,
    Command,
    Decode,
    Forget,
    GatherWeights,
    LoadBase,
    LoadSnapshot,
    LoadState,
    OpenBackend,
    OpenClient,
    OptimStep,
    RunLoss,
    SaveSharded,
    Score,
    ScoreData,
    ShadowForward,
    Stop,
    TakeSnapshot,
)
from kitchen.adapters.local.distributed.world import World, leave
from kitchen.engine.errors import BackendError


@dataclass
class Rank:
    """What this rank holds of rank 0's engine: its backend, and its parts of rank 0's clients,
    sampler snapshots and decode batch."""

    world: World
    backend: Any = None  # LocalBackend, made by OpenBackend
    clients: dict[str, Any] = field(default_factory=dict)  # LocalTrainingClient, by model id
    snapshots: dict[int, Any] = field(default_factory=dict)  # LoraSnapshot, by rank 0's id
    rows: Any = None  # CacheRows: this rank's share of rank 0's decode batch, when it spreads

    def base(self, base_model: str, quantization: str) -> Any:
        """The backend's shared, sharded copy of `base_model` (a ModelHost)."""
        return self.backend.load_shared(base_model, quantization)

    def snapshot(self, snapshot_id: int | None) -> Any:
        return None if snapshot_id is None else self.snapshots[snapshot_id]


def _open_backend(here: Rank, c: OpenBackend) -> None:
    from kitchen.adapters.local.backend import LocalBackend
    from kitchen.adapters.local.sample.decode_batch import CacheRows

    here.backend, here.clients, here.snapshots = LocalBackend(c.settings), {}, {}
    here.rows = CacheRows()


def _load_base(here: Rank, c: LoadBase) -> None:
    here.base(c.base_model, c.quantization)


def _open_client(here: Rank, c: OpenClient) -> None:
    from kitchen.adapters.local.clients.training_client import LocalTrainingClient

    if c.lora is None:  # full fine-tuning: a copy of its own, sharded
        host = here.backend.trained_host(c.base_model)
    else:
        host = here.base(c.base_model, here.backend.settings.base_quantization)
    here.clients[c.model_id] = LocalTrainingClient(here.backend, host, c.lora, c.seed, c.model_id)


def _close_client(here: Rank, c: CloseClient) -> None:
    here.clients.pop(c.model_id).close()


def _run_loss(here: Rank, c: RunLoss) -> None:
    with refused_alike(here.world):
        here.clients[c.model_id].passes.run_loss(c.data, c.loss_fn, c.config, c.backward)


def _score_data(here: Rank, c: ScoreData) -> None:
    with refused_alike(here.world):
        here.clients[c.model_id].passes.score_data(c.data)


def _backprop(here: Rank, c: Backprop) -> None:
    with refused_alike(here.world):
        here.clients[c.model_id].passes.backprop(c.data, c.grads)


def _optim_step(here: Rank, c: OptimStep) -> None:
    with refused_alike(here.world):
        here.clients[c.model_id]._optim_step(c.adam_params)


def _save_sharded(here: Rank, c: SaveSharded) -> None:
    with refused_alike(here.world):
        here.clients[c.model_id]._save_sharded(c.folder)


def _load_state(here: Rank, c: LoadState) -> None:
    with refused_alike(here.world):
        here.clients[c.model_id]._load_state(c.path, c.with_optimizer)


def _gather_weights(here: Rank, c: GatherWeights) -> None:
    with refused_alike(here.world):
        here.clients[c.model_id]._whole_weights()


def _take_snapshot(here: Rank, c: TakeSnapshot) -> None:
    here.snapshots[c.snapshot_id] = here.clients[c.model_id].snapshot(c.snapshot_id)


def _load_snapshot(here: Rank, c: LoadSnapshot) -> None:
    from kitchen.adapters.local.backend import snapshot_from

    host = here.base(c.base_model, c.quantization)
    here.snapshots[c.snapshot_id] = snapshot_from(Path(c.folder), host, c.snapshot_id)


def _forget(here: Rank, c: Forget) -> None:
    for snapshot_id in c.snapshot_ids:
        here.snapshots.pop(snapshot_id, None)


def _shadow_forward(here: Rank, c: ShadowForward) -> None:
    here.world.shadow_forward(here.base(c.base_model, c.quantization).base)


def _decode(here: Rank, c: Decode) -> None:
    from kitchen.adapters.local.distributed.ranked_executor import decode_on_every_rank

    host = here.base(c.base_model, c.quantization)
    ops = c.ops[here.world.rank - 1]
    decode_on_every_rank(
        here.world, host, here.snapshot(c.snapshot_id), c.merge, here.rows, ops, c.forward
    )


def _score(here: Rank, c: Score) -> None:
    from kitchen.adapters.local.distributed.ranked_executor import score_on_every_rank

    host = here.base(c.base_model, c.quantization)
    snapshot = here.snapshot(c.snapshot_id)
    with refused_alike(here.world):
        score_on_every_rank(here.world, host, snapshot, c.sequences, c.microbatch_tokens, c.merge)


C = TypeVar("C", bound=Command)
Handler = Callable[[Rank, Any], None]


def _handles(kind: type[C], handler: Callable[[Rank, C], None]) -> tuple[type[Command], Handler]:
    """One entry of HANDLERS: mypy checks that `handler` takes `kind`."""
    return kind, handler


# What this rank runs for each command rank 0 sends (commands.py); Stop ends serve_calls.
HANDLERS: dict[type[Command], Handler] = dict(
    [
        _handles(OpenBackend, _open_backend),
        _handles(LoadBase, _load_base),
        _handles(OpenClient, _open_client),
        _handles(CloseClient, _close_client),
        _handles(RunLoss, _run_loss),
        _handles(ScoreData, _score_data),
        _handles(Backprop, _backprop),
        _handles(OptimStep, _optim_step),
        _handles(SaveSharded, _save_sharded),
        _handles(LoadState, _load_state),
        _handles(GatherWeights, _gather_weights),
        _handles(TakeSnapshot, _take_snapshot),
        _handles(LoadSnapshot, _load_snapshot),
        _handles(Forget, _forget),
        _handles(ShadowForward, _shadow_forward),
        _handles(Decode, _decode),
        _handles(Score, _score),
    ]
)


def serve_calls(world: World) -> None:
    """Run rank 0's calls on this rank until it stops."""
    from kitchen.adapters.local.distributed.relaunch import STOP_SIGNALS

    # torch.distributed.run hands a signal that stops it (Ctrl-C, SIGTERM) to every rank. Rank 0
    # ends as one process ends (a server finishes its running step, a run its call) and then says
    # stop; this rank, gone at the signal, would fail rank 0's call midway, or its goodbye. A rank
    # 0 that dies instead ends this one through the group's closed connections; the launcher kills
    # a rank still there 30 s after the signal.
    for sig in STOP_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)

    here = Rank(world)
    while True:
        try:
            command = world.receive()
        except RuntimeError as e:  # gloo: "Connection closed by peer" (DistError is one too)
            if world.leader or "closed" not in str(e).lower():
                raise
            # Rank 0 ended without its goodbye: it died, and the launcher names it and stops the
            # run. This rank's traceback would only bury that line.
            print(f"rank {world.rank} of {world.size}: rank 0 is gone; stopping", file=sys.stderr)
            raise SystemExit(1) from None
        if isinstance(command, Stop):
            leave(world)
            return
        handler = HANDLERS.get(type(command))
        if handler is None:
            raise RuntimeError(f"rank {world.rank}: unknown command {command!r} from rank 0")
        handler(here, command)


def main() -> None:
    """A rank > 0 of a --nproc N run (kitchen/app/rank_entry.py starts it instead of the command): it
    joins the group, runs rank 0's calls until rank 0 stops, and ends."""
    from kitchen.adapters.local.distributed.world import world

    here = world()
    assert here is not None and not here.leader, "worker.main runs on ranks > 0"
    serve_calls(here)
    # This rank has left the group and has nothing left to write. Interpreter teardown would
    # destroy the C++ side (gloo's threads, the heartbeat thread's store connection) while a
    # daemon thread may still be in it: one run of the suite in three saw a rank that had
    # stopped cleanly abort there ("terminate called without an active exception", exit -6).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


@contextlib.contextmanager
def refused_alike(world: World) -> Iterator[None]:
    """A call whose input every rank refused before its first pass (World.sharded_call): rank 0
    answers its client with the reason and goes on, and so does this rank."""
    try:
        yield
    except BackendError:
        if world.broken:
            raise
