"""`kitchen serve`: the local engine behind the Tinker SDK 0.38.0 HTTP protocol, so the official
SDK, `--backend tinker` and unmodified tinker-cookbook scripts run against this machine.

    create_app(service) -> FastAPI           the app (routes in `app.py`)
    KitchenService(settings)                 sessions, models, samplers over the local engine
    serve(settings)                          preload models, then run uvicorn until Ctrl-C
    serving(settings) -> url                 the same in a thread of this process (tests, benches)

FastAPI and uvicorn are imported only by `app.py` / `serve`, never by `kitchen --help`.
"""

from __future__ import annotations

import contextlib
import socket
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

from kitchen.engine.errors import KitchenError
from kitchen.serve.settings import ServeSettings

__all__ = ["ServeSettings", "serve", "serving"]


@contextlib.contextmanager
def serving(settings: ServeSettings, backend: Any | None = None) -> Iterator[str]:
    """The server on loopback in a thread of this process, its models preloaded, for the block;
    yields its URL. `settings.port` 0 picks a free port; `backend` replaces the local engine."""
    import uvicorn

    from kitchen.serve.app import create_app
    from kitchen.serve.service import KitchenService

    service = KitchenService(settings, backend=backend)
    for model in settings.preload:
        service.preload(model)
    port = settings.port or _free_port()
    config = uvicorn.Config(create_app(service), port=port, log_level=settings.log_level)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError(f"kitchen serve did not start on port {port}")
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(30)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serve(settings: ServeSettings) -> None:
    """Load the engine and the preloaded models, then serve until interrupted."""
    import uvicorn

    from kitchen.adapters.local.distributed.world import world
    from kitchen.serve.app import create_app
    from kitchen.serve.service import KitchenService

    if settings.threads:
        import torch

        # The server and its clients share the machine; one intra-op thread each avoids
        # oversubscribing small machines (the engine applies the same when it loads a model).
        torch.set_num_threads(settings.threads)
    service = KitchenService(settings)
    for model in settings.preload:
        service.preload(model)
    print(
        f"kitchen serve: compute dtype {service.backend.dtype_name} (--dtype {settings.dtype})",
        file=sys.stderr,
        flush=True,
    )
    options: dict[str, Any] = {
        "host": settings.host,
        "port": settings.port,
        "log_level": settings.log_level,
        "access_log": False,
        "timeout_graceful_shutdown": 1,
    }
    here = world()  # rank 0's, under --nproc N
    if here is None:
        uvicorn.run(create_app(service), **options)
        return
    server = uvicorn.Server(uvicorn.Config(create_app(service), **options))
    broke = _stop_when_out_of_step(server, here)
    server.run()
    if broke:
        raise RanksOutOfStep(f"{broke[0]}; kitchen serve stopped (clients resume from checkpoints)")


class RanksOutOfStep(KitchenError):
    """--nproc N: a call failed mid-way on the ranks, which can run no later call."""


def _stop_when_out_of_step(server: Any, here: Any) -> list[str]:
    """Under --nproc N (`here`: rank 0's World), a thread that stops `server` once a call has left
    the ranks out of step (a rank stopped answering, or failed mid-pass): every later call would
    fail, so the server ends, as a run does, instead of answering each one so. The list gets what
    broke them."""
    broke: list[str] = []

    def watch() -> None:
        while not server.should_exit:
            if here.broken:
                broke.append(here.failure)
                server.should_exit = True
                return
            time.sleep(0.2)

    threading.Thread(target=watch, name="kitchen-ranks-watch", daemon=True).start()
    return broke
