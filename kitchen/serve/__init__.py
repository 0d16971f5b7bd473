"""`kitchen serve`: the local engine behind the Tinker SDK 0.38.0 HTTP protocol, so the official
SDK, `--backend tinker` and unmodified tinker-cookbook scripts run against this machine.

    create_app(service) -> FastAPI           the app (routes in `app.py`)
    KitchenService(settings)                 sessions, models, samplers over the local engine
    serve(settings)                          preload models, then run uvicorn until Ctrl-C

FastAPI and uvicorn are imported only by `app.py` / `serve`, never by `kitchen --help`.
"""

from __future__ import annotations

from kitchen.serve.settings import ServeSettings

__all__ = ["ServeSettings", "serve"]


def serve(settings: ServeSettings) -> None:
    """Load the engine and the preloaded models, then serve until interrupted."""
    import uvicorn

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
    uvicorn.run(
        create_app(service),
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level,
        access_log=False,
        timeout_graceful_shutdown=1,
    )
