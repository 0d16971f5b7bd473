"""FastAPI routes of the OpenAI-compatible API, over the same engine as the Tinker routes
(and /v1/responses and /v1/messages, translations onto chat: translated.py).

Errors come back in OpenAI's shape (`{"error": {"message", "type", ...}}`, HTTP 400/404), so the
official client raises its own BadRequestError / NotFoundError with the message.

Which weights a `model` name means is a `ModelSource`'s: `kitchen serve`'s catalog of base models
and checkpoints with the gateway's `policy` (kitchen/serve/gateway). Each call leases its model
for as long as it samples, streaming included, and gives it back when done; a call carrying the
rollout header (kitchen.ports.agents.ROLLOUT_HEADER) gets its model addressed to that rollout.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import pydantic
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from kitchen.serve.errors import UserError, error_message
from kitchen.serve.openai import chat as chat_api
from kitchen.serve.openai import completions as completion_api
from kitchen.serve.openai.models import Lease, ModelSource, ServedModel
from kitchen.serve.openai.schemas import ChatRequest, CompletionRequest

log = logging.getLogger("kitchen.serve.openai")
R = TypeVar("R", bound=pydantic.BaseModel)


def openai_error(
    message: str, status: int = 400, code: str | None = None, param: str | None = None
) -> Response:
    kind = {404: "not_found_error", 500: "server_error"}.get(status, "invalid_request_error")
    body = {"error": {"message": message, "type": kind, "param": param, "code": code}}
    return JSONResponse(body, status_code=status)


def refused(error: UserError) -> Response:
    """The OpenAI error a UserError is answered with (its status, code and param)."""
    return openai_error(error_message(error), error.status, error.code, error.param)


def stream_error(error: BaseException) -> dict[str, Any]:
    """The error event a stream ends with once its headers are sent."""
    body: dict[str, Any] = {"message": error_message(error)}
    if isinstance(error, UserError) and error.code is not None:
        body.update(type="invalid_request_error", code=error.code, param=error.param)
    return {"error": body}


async def parse_body(request: Request, model: type[R]) -> R:
    try:
        return model.model_validate_json(await request.body())
    except pydantic.ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(x) for x in first["loc"]) or "body"
        raise UserError(f"{request.url.path}: {where}: {first['msg']}") from None


def _sse(chunks: AsyncIterator[dict[str, Any]]) -> StreamingResponse:
    async def events() -> AsyncIterator[str]:
        try:
            async for chunk in chunks:
                yield f"data: {json.dumps(chunk)}\n\n"
        except Exception as e:  # headers are sent: the error travels as an event
            log.warning("kitchen serve: a streamed completion failed: %s", e)
            yield f"data: {json.dumps(stream_error(e))}\n\n"
        yield "data: [DONE]\n\n"

    return StreamingResponse(events(), media_type="text/event-stream")


async def _peeked(chunks: AsyncIterator[dict[str, Any]]) -> AsyncIterator[dict[str, Any]]:
    """`chunks` with its first item computed now, so a bad request fails before headers go out."""
    first = await anext(chunks)

    async def rest() -> AsyncIterator[dict[str, Any]]:
        yield first
        async for chunk in chunks:
            yield chunk

    return rest()


def rollout_address(request: Request) -> str | None:
    """The rollout a call is addressed to: the rollout header (the gateway turns the path prefix
    /rollouts/<address> into it), or None."""
    from kitchen.ports.agents import ROLLOUT_HEADER

    address = request.headers.get(ROLLOUT_HEADER)
    return address or None


async def answer(
    request: Request,
    models: ModelSource,
    schema: type[R],
    once: Callable[[ServedModel, R], Awaitable[dict[str, Any]]],
    streamed: Callable[[ServedModel, R], AsyncIterator[dict[str, Any]]],
) -> Response:
    """One OpenAI-style call: parse the body as `schema`, lease the model it names, answer with
    `once` (JSON) or `streamed` (server-sent events); the lease is given back when the answer is
    complete. Mistakes come back as OpenAI errors naming the field."""
    try:
        body = await parse_body(request, schema)
        lease = await models.lease(str(getattr(body, "model", "")), rollout_address(request))
    except UserError as e:
        return refused(e)
    streaming = bool(getattr(body, "stream", False))
    try:
        if streaming:
            return _sse(await _peeked(_holding(streamed(lease.model, body), lease)))
        return JSONResponse(await once(lease.model, body))
    except UserError as e:
        return refused(e)
    except Exception as e:
        log.exception("kitchen serve: %s failed", request.url.path)
        return openai_error(f"{request.url.path}: {error_message(e)}", 500)
    finally:
        if not streaming:
            lease.release()


async def _holding(
    chunks: AsyncIterator[dict[str, Any]], lease: Lease
) -> AsyncIterator[dict[str, Any]]:
    """`chunks`, with `lease` given back once they end (or fail, or the client goes away)."""
    try:
        async for chunk in chunks:
            yield chunk
    finally:
        lease.release()


def add_openai_routes(app: FastAPI, models: ModelSource) -> None:
    """Mount /v1/models, /v1/completions, /v1/chat/completions, /v1/responses and /v1/messages
    on `app`."""

    @app.get("/v1/models")
    async def list_models() -> Response:
        return JSONResponse({"object": "list", "data": [_card(n) for n in models.names()]})

    @app.get("/v1/models/{name:path}")
    async def get_model(name: str) -> Response:
        try:
            lease = await models.lease(name, None)
        except UserError as e:
            return openai_error(error_message(e), 404)
        lease.release()
        return JSONResponse(_card(name))

    @app.post("/v1/completions")
    async def completions(request: Request) -> Response:
        return await answer(
            request, models, CompletionRequest, completion_api.complete, completion_api.stream
        )

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> Response:
        return await answer(request, models, ChatRequest, chat_api.chat, chat_api.stream)

    from kitchen.serve.openai.translated import add_translated_routes  # it imports this module

    async def open_model(name: str, request: Request) -> tuple[ServedModel, Callable[[], None]]:
        """The model the chat route would answer `name` with (leased, so a call on `policy` is
        recorded under its rollout), and what to call when done."""
        lease = await models.lease(name, rollout_address(request))
        return lease.model, lease.release

    add_translated_routes(app, open_model)


def _card(name: str) -> dict[str, Any]:
    return {"id": name, "object": "model", "created": 0, "owned_by": "kitchen"}
