"""The FastAPI app: Tinker SDK 0.38.0 routes over a `KitchenService`.

Request bodies are the SDK's own pydantic request types (JSON) or its protobuf messages
(forward_backward); results of asynchronous requests are long-polled via /api/v1/retrieve_future.
Mistakes come back at once as 4xx with a one-line `detail`; never as a 5xx, which the SDK would
retry for minutes. The four per-step routes are plain ASGI in front of this app (`hot_routes.py`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any, TypeVar

import pydantic
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from starlette.types import ASGIApp
from tinker import types

from kitchen.serve.checkpoint_routes import add_checkpoint_routes
from kitchen.serve.errors import UserError
from kitchen.serve.gateway import Gateway
from kitchen.serve.gateway.addresses import RolloutPaths
from kitchen.serve.hot_routes import (
    BodyLimit,
    HotRoutes,
    RequireKey,
    hot_handlers,
    json_response,
    parse,
    server_error_response,
    user_error_response,
)
from kitchen.serve.listings import add_listing_routes
from kitchen.serve.openai.models import ModelCatalog
from kitchen.serve.paths import checkpoint_ref
from kitchen.serve.requests import idle_gaps
from kitchen.serve.service import KitchenService

log = logging.getLogger("kitchen.serve")
M = TypeVar("M", bound=pydantic.BaseModel)
_json = json_response


async def _parse(request: Request, model: type[M]) -> M:
    return parse(await request.body(), model, request.url.path)


async def _string_field(request: Request, route: str, key: str, example: str) -> str:
    """The one string field of a body the SDK sends as `{key: "..."}` (no SDK type to parse it
    with); anything else is a one-line 400."""
    try:
        body = json.loads(await request.body() or b"{}")
    except ValueError:
        raise UserError(f"{route}: the body is not JSON") from None
    value = body.get(key) if isinstance(body, dict) else None
    if not isinstance(value, str):
        raise UserError(f'{route}: expected {{"{key}": "{example}"}}')
    return value


def create_app(service: KitchenService, gateway: Gateway | None = None) -> ASGIApp:
    """The ASGI app for `service`; `kitchen serve` runs it under uvicorn. Its OpenAI routes are
    `gateway`'s (default: one over the service's models, `policy_gateway`)."""
    gateway = gateway or policy_gateway(service)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        reaper = asyncio.create_task(_reap(service))
        try:
            yield
        finally:
            reaper.cancel()
            await asyncio.to_thread(service.close)

    app = FastAPI(title="kitchen serve", lifespan=lifespan, docs_url=None, redoc_url=None)

    @app.exception_handler(UserError)
    async def _user_error(request: Request, e: UserError) -> Response:
        return user_error_response(e)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, e: RequestValidationError) -> Response:
        first = e.errors()[0] if e.errors() else {"loc": (), "msg": "invalid request"}
        where = ".".join(str(x) for x in first["loc"]) or "body"
        return user_error_response(UserError(f"{request.url.path}: {where}: {first['msg']}"))

    @app.exception_handler(Exception)
    async def _server_error(request: Request, e: Exception) -> Response:
        return server_error_response(request.url.path, e)

    _session_routes(app, service)
    _training_routes(app, service)
    _sampling_routes(app, service)
    gateway.add_routes(app)
    add_listing_routes(app, service)
    add_checkpoint_routes(app, service)  # last: it ends with the catch-all
    outer: ASGIApp = BodyLimit(
        HotRoutes(app, hot_handlers(service)), service.settings.max_body_bytes
    )
    if service.settings.require_key:
        outer = RequireKey(outer, service.settings.api_key)
    return RolloutPaths(outer)


def policy_gateway(service: KitchenService) -> Gateway:
    """The gateway of `kitchen serve`: its base models and checkpoints by name, and `policy`: the
    newest sampler a training session opened on its own weights (KitchenService.on_policy), or
    the first preloaded base model (version 0) until one has."""
    base = service.settings.preload[0] if service.settings.preload else None

    def base_policy() -> tuple[Any, int, str]:
        assert base is not None
        return service.open_sampler(None, base).sampler, 0, base

    gateway = Gateway(catalog=ModelCatalog(service), default_policy=base_policy if base else None)
    service.on_policy(gateway.set_policy)
    return gateway


def _session_routes(app: FastAPI, service: KitchenService) -> None:
    @app.get("/api/v1/healthz")
    async def healthz() -> Response:
        return _json(types.HealthResponse(status="ok"))

    @app.post("/api/v1/client/config")
    async def client_config() -> Response:
        # Flags this server relies on: API keys (no JWT exchange), custom losses run client-side,
        # per-request retrieve_future polling, uncompressed protobuf.
        return _json(
            types.ClientConfigResponse(
                pjwt_auth_enabled=False,
                custom_loss_server_side=False,
                sample_use_retrieve_futures=False,
                proto_compress_fwdbwd=False,
                # httpx's own transport: on loopback it is as fast, and adds no runtime threads
                # to a client that shares a small machine with this server.
                use_pyqwest_transport=False,
            )
        )

    @app.post("/api/v1/client/dynamic_config")
    async def dynamic_config() -> Response:
        # Abandoned sampling futures send cancel_future, which drops their queued work.
        return _json(types.ClientDynamicConfigResponse(sample_cancel_enabled=True))

    @app.post("/api/v1/create_session")
    async def create_session(request: Request) -> Response:
        return _json(service.create_session(await _parse(request, types.CreateSessionRequest)))

    @app.post("/api/v1/session_heartbeat")
    async def heartbeat(request: Request) -> Response:
        body = await _parse(request, types.SessionHeartbeatRequest)
        return _json(service.heartbeat(body.session_id))

    @app.post("/api/v1/sessions/{session_id}/finish")
    async def finish(session_id: str) -> Response:
        service.finish_session(session_id)
        return _json({})

    @app.get("/api/v1/get_server_capabilities")
    async def capabilities() -> Response:
        models = [
            types.SupportedModel(
                model_name=name, max_context_length=ctx, trainable=True, sampleable=True
            )
            for name, ctx in service.loaded_models()
        ]
        return _json(types.GetServerCapabilitiesResponse(supported_models=models))

    @app.post("/api/v1/telemetry")
    async def telemetry() -> Response:
        return _json({"status": "accepted"})  # SDK telemetry stays on this machine, unread


def _training_routes(app: FastAPI, service: KitchenService) -> None:
    @app.post("/api/v1/create_model")
    async def create_model(request: Request) -> Response:
        body = await _parse(request, types.CreateModelRequest)
        await asyncio.to_thread(_known_model, body.base_model)
        return _json(service.create_model(body))

    @app.post("/api/v1/get_info")
    async def get_info(request: Request) -> Response:
        return _json(service.get_info(await _parse(request, types.GetInfoRequest)))

    saves: list[tuple[str, type[Any], str, Callable[[Any], pydantic.BaseModel]]] = [
        ("save_weights", types.SaveWeightsRequest, "state", service.save_weights),
        (
            "save_weights_for_sampler",
            types.SaveWeightsForSamplerRequest,
            "sampler",
            service.save_weights_for_sampler,
        ),
        (
            "save_weights_external",
            types.SaveWeightsExternalRequest,
            "external",
            service.save_weights_external,
        ),
    ]
    for route, request_type, kind, save in saves:
        _save_route(app, route, request_type, kind, save)

    @app.post("/api/v1/load_weights")
    async def load_weights(request: Request) -> Response:
        return _json(service.load_weights(await _parse(request, types.LoadWeightsRequest)))

    @app.post("/api/v1/weights_info")
    async def weights_info(request: Request) -> Response:
        path = await _string_field(request, "weights_info", "tinker_path", "tinker://...")
        return _json(service.weights_info(path))

    @app.get("/kitchen/v1/lanes/{model_id}")
    async def lane_stats(model_id: str) -> Response:
        """Per-request engine timing of one model: dispatch/finish times and idle gaps."""
        events = service.lane_events(model_id)
        return _json(
            {
                "events": [e.__dict__ for e in events],
                "idle_gaps_s": idle_gaps(events),
            }
        )


def _save_route(
    app: FastAPI,
    route: str,
    request_type: type[Any],
    kind: str,
    save: Callable[[Any], pydantic.BaseModel],
) -> None:
    @app.post(f"/api/v1/{route}", name=route)
    async def handler(request: Request) -> Response:
        body = await _parse(request, request_type)
        if body.path:  # a bad name is refused now, not after the SDK polled for it
            checkpoint_ref("run", kind, body.path)
        return _json(save(body))


def _sampling_routes(app: FastAPI, service: KitchenService) -> None:
    @app.post("/api/v1/create_sampling_session")
    async def create_sampling_session(request: Request) -> Response:
        body = await _parse(request, types.CreateSamplingSessionRequest)
        # In a worker thread: opening a sampler may load a model.
        return _json(await asyncio.to_thread(service.create_sampling_session, body))

    @app.get("/api/v1/samplers/{sampler_id}")
    async def get_sampler(sampler_id: str) -> Response:
        return _json(service.get_sampler(sampler_id))

    @app.post("/api/v1/cancel_future")
    async def cancel_future(request: Request) -> Response:
        service.cancel_request(await _string_field(request, "cancel_future", "request_id", "..."))
        return _json({})


def _known_model(base_model: str) -> None:
    """A base model name the engine cannot resolve is refused at once (400), not after the SDK
    polled a future for it."""
    from kitchen.adapters.local.model.locate import resolve_model
    from kitchen.engine.errors import KitchenError

    try:
        resolve_model(base_model)
    except (KitchenError, OSError, ValueError) as e:
        raise UserError(f"create_model: base model {base_model!r}: {e}") from None


async def _reap(service: KitchenService) -> None:
    while True:
        await asyncio.sleep(min(60.0, service.settings.session_timeout_s / 2))
        for session_id in await asyncio.to_thread(service.reap_idle_sessions):
            log.warning("kitchen serve: session %s stopped heartbeating; finished it", session_id)
