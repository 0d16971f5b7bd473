"""What ranks > 0 of a --nproc N run do instead of the recipe: take each engine call rank 0 sends
(world.py) and run this rank's part of it, until rank 0 says stop."""

from __future__ import annotations

from typing import Any

from kitchen.adapters.local.distributed.world import World, leave


def serve_calls(world: World) -> None:
    """Run rank 0's calls on this rank until it stops."""
    from kitchen.adapters.local.backend import LocalBackend
    from kitchen.adapters.local.training_client import LocalTrainingClient

    backend: Any = None
    clients: dict[str, LocalTrainingClient] = {}
    while True:
        kind, *args = world.receive()
        if kind == "stop":
            leave()
            return
        if kind == "backend":
            backend, clients = LocalBackend(args[0]), {}
        elif kind == "host":
            backend._shared_host(*args)
        elif kind == "client":
            model_id, base_model, lora, seed = args
            host = backend._shared_host(base_model, backend.settings.base_quantization)
            clients[model_id] = LocalTrainingClient(backend, host, lora, seed)
        elif kind == "call":
            model_id, method, call_args = args
            getattr(clients[model_id], method)(*call_args)
        elif kind == "close":
            clients.pop(args[0]).close()
        else:
            raise RuntimeError(f"rank {world.rank}: unknown call {kind!r} from rank 0")
