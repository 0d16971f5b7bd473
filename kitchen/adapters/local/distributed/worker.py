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
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from tinker import types

from kitchen.adapters.local.distributed.commands import (
    Backprop,
    BaseCall,
    ClientCall,
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

if TYPE_CHECKING:
    from kitchen.adapters.local.model.host import LoraSnapshot, ModelHost
    from kitchen.adapters.local.model.lora import LoraSpec
    from kitchen.ports import BackendSettings


class RankPasses(Protocol):
    """This rank's part of a client's training passes (clients/training_passes.py)."""

    def run_loss(
        self, data: list[types.Datum], loss_fn: str, config: Any, backward: bool
    ) -> types.ForwardBackwardOutput: ...

    def score_data(self, data: list[types.Datum]) -> list[Any] | None: ...

    def backprop(self, data: list[types.Datum], grads: Any) -> None: ...


class RankCheckpoints(Protocol):
    """This rank's part of a client's checkpoints and snapshots (clients/checkpointer.py)."""

    def save_sharded(self, folder: str) -> None: ...

    def load_state(self, path: str, with_optimizer: bool) -> types.LoadWeightsResponse: ...

    def whole_weights(self) -> dict[str, Any]: ...

    def snapshot(self, snapshot_id: int | None = None) -> LoraSnapshot: ...


class RankClient(Protocol):
    """This rank's part of one of rank 0's training clients (clients/training_client.py)."""

    @property
    def passes(self) -> RankPasses: ...

    @property
    def checkpoints(self) -> RankCheckpoints: ...

    def _optim_step(self, adam_params: types.AdamParams) -> types.OptimStepResponse: ...

    def close(self, cancel_queued: bool = False) -> None: ...


class RankEngine(Protocol):
    """This rank's engine (backend.py's LocalBackend), opened when rank 0 opens its own."""

    def load_shared(self, base_model: str, quantization: str) -> ModelHost: ...

    def open_rank_client(
        self, base_model: str, lora: LoraSpec | None, seed: int, model_id: str
    ) -> RankClient: ...

    def load_snapshot(self, folder: Path, host: ModelHost, snapshot_id: int) -> LoraSnapshot: ...


# What makes a rank's engine from rank 0's settings: the entry point that starts the rank hands
# it over (kitchen/app/rank_entry.py), so the ranks' room never imports the engine above it.
OpenEngine = Callable[["BackendSettings"], RankEngine]


@dataclass
class Rank:
    """What this rank holds of rank 0's engine: its engine, and its parts of rank 0's clients,
    sampler snapshots and decode batch."""

    world: World
    open_engine: OpenEngine
    engine: Any = None  # a RankEngine, made by OpenBackend
    clients: dict[str, RankClient] = field(default_factory=dict)  # by model id
    snapshots: dict[int, LoraSnapshot] = field(default_factory=dict)  # by rank 0's id
    rows: Any = None  # CacheRows: this rank's share of rank 0's decode batch, when it spreads

    def base(self, call: BaseCall) -> ModelHost:
        """The engine's shared, sharded copy of the base `call` is on."""
        return self.engine.load_shared(call.base_model, call.quantization)  # type: ignore[no-any-return]

    def snapshot(self, snapshot_id: int | None) -> LoraSnapshot | None:
        return None if snapshot_id is None else self.snapshots[snapshot_id]


def _open_backend(here: Rank, c: OpenBackend) -> None:
    from kitchen.adapters.local.sample.decode_batch import CacheRows

    here.engine, here.clients, here.snapshots = here.open_engine(c.settings), {}, {}
    here.rows = CacheRows()


def _load_base(here: Rank, c: LoadBase) -> None:
    here.base(c)


def _open_client(here: Rank, c: OpenClient) -> None:
    client = here.engine.open_rank_client(c.base_model, c.lora, c.seed, c.model_id)
    here.clients[c.model_id] = client


def _close_client(here: Rank, c: CloseClient) -> None:
    here.clients.pop(c.model_id).close()


K = TypeVar("K", bound=ClientCall)


def _refusable(call: Callable[[RankClient, K], object]) -> Callable[[Rank, K], None]:
    """The handler of a client's call that every rank may refuse alike (refused_alike): `call`
    on this rank's part of the client the command names."""

    def handle(here: Rank, c: K) -> None:
        with refused_alike(here.world):
            call(here.clients[c.model_id], c)

    return handle


def _run_loss(client: RankClient, c: RunLoss) -> object:
    return client.passes.run_loss(c.data, c.loss_fn, c.config, c.backward)


def _score_data(client: RankClient, c: ScoreData) -> object:
    return client.passes.score_data(c.data)


def _backprop(client: RankClient, c: Backprop) -> None:
    client.passes.backprop(c.data, c.grads)


def _optim_step(client: RankClient, c: OptimStep) -> object:
    return client._optim_step(c.adam_params)


def _save_sharded(client: RankClient, c: SaveSharded) -> None:
    client.checkpoints.save_sharded(c.folder)


def _load_state(client: RankClient, c: LoadState) -> object:
    return client.checkpoints.load_state(c.path, c.with_optimizer)


def _gather_weights(client: RankClient, c: GatherWeights) -> object:
    return client.checkpoints.whole_weights()


def _take_snapshot(here: Rank, c: TakeSnapshot) -> None:
    here.snapshots[c.snapshot_id] = here.clients[c.model_id].checkpoints.snapshot(c.snapshot_id)


def _load_snapshot(here: Rank, c: LoadSnapshot) -> None:
    host = here.base(c)
    here.snapshots[c.snapshot_id] = here.engine.load_snapshot(Path(c.folder), host, c.snapshot_id)


def _forget(here: Rank, c: Forget) -> None:
    for snapshot_id in c.snapshot_ids:
        here.snapshots.pop(snapshot_id, None)


def _shadow_forward(here: Rank, c: ShadowForward) -> None:
    here.world.shadow_forward(here.base(c).base)


def _decode(here: Rank, c: Decode) -> None:
    from kitchen.adapters.local.distributed.ranked_executor import decode_on_every_rank

    host = here.base(c)
    ops = c.ops[here.world.rank - 1]
    decode_on_every_rank(
        here.world, host, here.snapshot(c.snapshot_id), c.merge, here.rows, ops, c.forward
    )


def _score(here: Rank, c: Score) -> None:
    from kitchen.adapters.local.distributed.ranked_executor import score_on_every_rank

    host = here.base(c)
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
        _handles(RunLoss, _refusable(_run_loss)),
        _handles(ScoreData, _refusable(_score_data)),
        _handles(Backprop, _refusable(_backprop)),
        _handles(OptimStep, _refusable(_optim_step)),
        _handles(SaveSharded, _refusable(_save_sharded)),
        _handles(LoadState, _refusable(_load_state)),
        _handles(GatherWeights, _refusable(_gather_weights)),
        _handles(TakeSnapshot, _take_snapshot),
        _handles(LoadSnapshot, _load_snapshot),
        _handles(Forget, _forget),
        _handles(ShadowForward, _shadow_forward),
        _handles(Decode, _decode),
        _handles(Score, _score),
    ]
)


def serve_calls(world: World, open_engine: OpenEngine) -> None:
    """Run rank 0's calls on this rank, on the engine `open_engine` makes, until it stops."""
    from kitchen.adapters.local.distributed.relaunch import STOP_SIGNALS

    # torch.distributed.run hands a signal that stops it (Ctrl-C, SIGTERM) to every rank. Rank 0
    # ends as one process ends (a server finishes its running step, a run its call) and then says
    # stop; this rank, gone at the signal, would fail rank 0's call midway, or its goodbye. A rank
    # 0 that dies instead ends this one through the group's closed connections; the launcher kills
    # a rank still there 30 s after the signal.
    for sig in STOP_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)

    here = Rank(world, open_engine)
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


def main(open_engine: OpenEngine) -> None:
    """A rank > 0 of a --nproc N run (kitchen/app/rank_entry.py starts it instead of the command,
    with the engine to open): it joins the group, runs rank 0's calls until rank 0 stops, and
    ends."""
    from kitchen.adapters.local.distributed.world import world

    here = world()
    assert here is not None and not here.leader, "worker.main runs on ranks > 0"
    serve_calls(here, open_engine)
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
