"""The per-step routes, served as plain ASGI in front of the FastAPI app.

forward_backward, optim_step, asample and retrieve_future run on every training or sampling step.
On a small model FastAPI's middleware and dependency layers cost more CPU per request than this
server's own work, so these four skip them; every other route is an ordinary FastAPI route
(`app.py`). Same bodies, same errors: the SDK's request types in, one-line 4xx `detail` out.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pydantic
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from tinker import types

from kitchen.serve import wire
from kitchen.serve.errors import NotFound, UserError, error_category, error_message
from kitchen.serve.external_weights import DOWNLOAD_PREFIX
from kitchen.serve.requests import FWDBWD, SAMPLE
from kitchen.serve.service import KitchenService

log = logging.getLogger("kitchen.serve")
M = TypeVar("M", bound=pydantic.BaseModel)
Headers = dict[bytes, bytes]
Handler = Callable[[bytes, Headers], Awaitable[Response]]
NO_RETRY = {"x-should-retry": "false"}


def json_response(body: pydantic.BaseModel | dict[str, Any], status: int = 200) -> Response:
    if isinstance(body, pydantic.BaseModel):
        text = body.model_dump_json(exclude_none=True)
    else:
        text = json.dumps(body)
    return Response(text, status_code=status, media_type="application/json", headers=NO_RETRY)


def user_error_response(error: UserError) -> Response:
    return json_response({"detail": error_message(error), "category": "user"}, error.status)


def server_error_response(path: str, error: BaseException) -> Response:
    log.error("kitchen serve: %s failed", path, exc_info=error)
    detail = f"{path}: {error_message(error)}"
    return json_response({"detail": detail, "category": error_category(error)}, 400)


def parse(raw: bytes, model: type[M], path: str) -> M:
    try:
        return model.model_validate_json(raw)
    except pydantic.ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(x) for x in first["loc"]) or "body"
        raise UserError(f"{path}: {where}: {first['msg']}") from None


def hot_handlers(service: KitchenService) -> dict[str, Handler]:
    async def forward_backward(body: bytes, headers: Headers) -> Response:
        if headers.get(b"content-encoding") == b"zstd":
            import zstandard

            body = zstandard.ZstdDecompressor().decompress(body)
        if wire.PROTO_CONTENT_TYPE.encode() not in headers.get(b"content-type", b""):
            raise UserError("forward_backward: send a ForwardBackwardRequest protobuf body")
        return json_response(service.forward_backward(wire.decode_forward_backward(body)))

    async def optim_step(body: bytes, headers: Headers) -> Response:
        request = parse(body, types.OptimStepRequest, "/api/v1/optim_step")
        if not isinstance(request.optim_params, types.AdamParams):  # the union's catch-all
            adam = request.optim_params.model_dump()
            request.optim_params = parse(
                json.dumps(adam).encode(), types.AdamParams, "optim_params"
            )
        return json_response(service.optim_step(request))

    async def asample(body: bytes, headers: Headers) -> Response:
        request = parse(body, types.SampleRequest, "/api/v1/asample")
        if request.sampling_session_id is None:  # opens a sampler, may load a model
            return json_response(await asyncio.to_thread(service.asample, request))
        return json_response(service.asample(request))

    async def retrieve_future(body: bytes, headers: Headers) -> Response:
        request = parse(body, types.FutureRetrieveRequest, "/api/v1/retrieve_future")
        record = service.requests.get(request.request_id)
        if record is None:
            raise NotFound(f"request {request.request_id!r} is unknown to this server")
        if not await service.requests.wait(record, service.settings.poll_timeout_s):
            return json_response(
                {"type": "try_again", "request_id": record.request_id, "queue_state": "active"}
            )
        service.requests.delivered(record)
        error = record.future.exception()
        if error is not None:
            return json_response({"error": error_message(error), "category": error_category(error)})
        return _result(record.encoding, record.future.result(), headers)

    return {
        "/api/v1/forward_backward": forward_backward,
        "/api/v1/optim_step": optim_step,
        "/api/v1/asample": asample,
        "/api/v1/retrieve_future": retrieve_future,
    }


def _result(encoding: str, result: Any, headers: Headers) -> Response:
    """ForwardBackwardOutput and SampleResponse as protobuf when asked (the SDK always asks)."""
    proto = wire.PROTO_CONTENT_TYPE.encode() in headers.get(b"accept", b"")
    if encoding == FWDBWD:
        if proto:
            body = wire.encode_forward_backward_output(result)
            return Response(body, media_type=wire.PROTO_CONTENT_TYPE)
        return json_response(wire.forward_backward_output_json(result))
    if encoding == SAMPLE:
        if proto:
            return Response(wire.encode_sample_response(result), media_type=wire.PROTO_CONTENT_TYPE)
        return json_response(wire.sample_response_json(result))
    return json_response(result)


class HotRoutes:
    """ASGI: the routes in `handlers` (POST only) here, everything else to `app`."""

    def __init__(self, app: ASGIApp, handlers: dict[str, Handler]) -> None:
        self.app = app
        self.handlers = handlers

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        handler = self.handlers.get(scope["path"]) if scope["type"] == "http" else None
        if handler is None or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        body = await _read_body(receive)
        try:
            response = await handler(body, dict(scope["headers"]))
        except UserError as e:
            response = user_error_response(e)
        except Exception as e:  # never a 5xx: the SDK would retry it for minutes
            response = server_error_response(scope["path"], e)
        await response(scope, receive, send)


async def _read_body(receive: Receive) -> bytes:
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


class RequireKey:
    """Refuse requests without an X-API-Key header (or with the wrong one, when a key is set).
    The outermost layer: every route, the health check and routes added later included, is
    behind it; only external weights downloads pass, whose signed URL is their credential."""

    def __init__(self, app: ASGIApp, expected: str | None) -> None:
        self.app = app
        self.expected = expected

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not scope["path"].startswith(DOWNLOAD_PREFIX):
            key = _api_key(dict(scope["headers"]))
            ok = bool(key) and (self.expected is None or hmac.compare_digest(key, self.expected))
            if not ok:
                what = "missing" if not key else "not accepted"
                detail = f"API key {what}: this server requires an X-API-Key header"
                await json_response({"detail": detail}, 401)(scope, receive, send)
                return
        await self.app(scope, receive, send)


def _api_key(headers: Headers) -> str:
    """X-API-Key, or an `Authorization: Bearer` token (what OpenAI-style clients send)."""
    key = headers.get(b"x-api-key", b"")
    if not key:
        auth = headers.get(b"authorization", b"")
        key = auth[7:] if auth[:7].lower() == b"bearer " else b""
    return key.decode("latin-1").strip()


class BodyLimit:
    """Refuse request bodies over `max_bytes` with 413 before any route reads them: by the
    Content-Length header, or, for a streamed body, as soon as the bytes received pass it."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length", b"0")
        try:
            too_big = int(declared) > self.max_bytes
        except ValueError:
            await self._refuse(scope, receive, send, "Content-Length is not a number", 400)
            return
        if too_big:
            await self._refuse(scope, receive, send, f"{int(declared)} bytes")
            return
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            if size > self.max_bytes:
                await self._refuse(scope, receive, send, f"over {size} bytes")
                return
            if not message.get("more_body", False):
                break
        body, replayed = b"".join(chunks), False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:
                return await receive()  # after the body: the disconnect
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)

    async def _refuse(
        self, scope: Scope, receive: Receive, send: Send, got: str, status: int = 413
    ) -> None:
        detail = f"{scope['path']}: request body too large ({got}; this server takes at most {self.max_bytes} bytes)"
        if status != 413:
            detail = f"{scope['path']}: {got}"
        await json_response({"detail": detail, "category": "user"}, status)(scope, receive, send)
