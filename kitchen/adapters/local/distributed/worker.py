"""What ranks > 0 of a --nproc N run do instead of the recipe: take each engine call rank 0 sends
(world.py) and run this rank's part of it, until rank 0 says stop."""

from __future__ import annotations

import contextlib
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kitchen.adapters.local.distributed.world import World, leave
from kitchen.engine.errors import BackendError


def serve_calls(world: World) -> None:
    """Run rank 0's calls on this rank until it stops."""
    from kitchen.adapters.local.backend import LocalBackend, snapshot_from
    from kitchen.adapters.local.decode_batch import CacheRows
    from kitchen.adapters.local.distributed.launch import STOP_SIGNALS
    from kitchen.adapters.local.sampling_client import decode_on_every_rank, score_on_every_rank
    from kitchen.adapters.local.training_client import LocalTrainingClient

    # torch.distributed.run hands a signal that stops it (Ctrl-C, SIGTERM) to every rank. Rank 0
    # ends as one process ends (a server finishes its running step, a run its call) and then says
    # stop; this rank, gone at the signal, would fail rank 0's call midway, or its goodbye. A rank
    # 0 that dies instead ends this one through the group's closed connections; the launcher kills
    # a rank still there 30 s after the signal.
    for sig in STOP_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)

    backend: Any = None
    clients: dict[str, LocalTrainingClient] = {}
    snapshots: dict[int, Any] = {}  # this rank's copies of rank 0's sampler snapshots, by id
    rows = CacheRows()  # this rank's share of rank 0's decode batch, when it spreads
    while True:
        try:
            kind, *args = world.receive()
        except RuntimeError as e:  # gloo: "Connection closed by peer" (DistError is one too)
            if world.leader or "closed" not in str(e).lower():
                raise
            # Rank 0 ended without its goodbye: it died, and the launcher names it and stops the
            # run. This rank's traceback would only bury that line.
            print(f"rank {world.rank} of {world.size}: rank 0 is gone; stopping", file=sys.stderr)
            raise SystemExit(1) from None
        if kind == "stop":
            leave()
            return
        if kind == "backend":
            backend, clients, snapshots, rows = LocalBackend(args[0]), {}, {}, CacheRows()
        elif kind == "host":
            backend._shared_host(*args)
        elif kind == "client":
            model_id, base_model, lora, seed = args
            if lora is None:  # full fine-tuning: a copy of its own, sharded
                host = backend.trained_host(base_model)
            else:
                host = backend._shared_host(base_model, backend.settings.base_quantization)
            clients[model_id] = LocalTrainingClient(backend, host, lora, seed, model_id)
        elif kind == "call":
            model_id, method, call_args = args
            with refused_alike(world):
                getattr(clients[model_id], method)(*call_args)
        elif kind == "close":
            clients.pop(args[0]).close()
        elif kind == "forward":  # beside a forward of rank 0's decode batch
            world.shadow_forward(backend._shared_host(*args).base)
        elif kind == "decode":
            base_model, quantization, snapshot_id, merge, ops, forward = args
            host = backend._shared_host(base_model, quantization)
            snapshot = None if snapshot_id is None else snapshots[snapshot_id]
            decode_on_every_rank(world, host, snapshot, merge, rows, ops[world.rank - 1], forward)
        elif kind == "score":
            base_model, quantization, snapshot_id, merge, sequences, microbatch_tokens = args
            host = backend._shared_host(base_model, quantization)
            snapshot = None if snapshot_id is None else snapshots[snapshot_id]
            with refused_alike(world):
                score_on_every_rank(world, host, snapshot, sequences, microbatch_tokens, merge)
        elif kind == "snapshot":
            model_id, snapshot_id = args
            snapshots[snapshot_id] = clients[model_id].snapshot(snapshot_id)
        elif kind == "snapshot_path":
            folder, snapshot_id, base_model, quantization = args
            host = backend._shared_host(base_model, quantization)
            snapshots[snapshot_id] = snapshot_from(Path(folder), host, snapshot_id)
        elif kind == "forget":
            for snapshot_id in args[0]:
                snapshots.pop(snapshot_id, None)
        else:
            raise RuntimeError(f"rank {world.rank}: unknown call {kind!r} from rank 0")


@contextlib.contextmanager
def refused_alike(world: World) -> Iterator[None]:
    """A call whose input every rank refused before its first pass (World.sharded_call): rank 0
    answers its client with the reason and goes on, and so does this rank."""
    try:
        yield
    except BackendError:
        if world.broken:
            raise
