"""FastAPI routes of the OpenAI-compatible API, over the same engine as the Tinker routes
(and /v1/responses and /v1/messages, translations onto chat: translated.py).

Errors come back in OpenAI's shape (`{"error": {"message", "type", ...}}`, HTTP 400/404), so the
official client raises its own BadRequestError / NotFoundError with the message.
"""

from __future__ import annotations

import asyncio
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
from kitchen.serve.openai.models import ModelCatalog, ServedModel
from kitchen.serve.openai.schemas import ChatRequest, CompletionRequest
from kitchen.serve.service import KitchenService

log = logging.getLogger("kitchen.serve.openai")
R = TypeVar("R", CompletionRequest, ChatRequest)


def openai_error(message: str, status: int = 400) -> Response:
    kind = {404: "not_found_error", 500: "server_error"}.get(status, "invalid_request_error")
    body = {"error": {"message": message, "type": kind, "param": None, "code": None}}
    return JSONResponse(body, status_code=status)


async def _body(request: Request, model: type[R]) -> R:
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
            yield f"data: {json.dumps({'error': {'message': error_message(e)}})}\n\n"
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


def add_openai_routes(app: FastAPI, service: KitchenService) -> None:
    """Mount /v1/models, /v1/completions, /v1/chat/completions, /v1/responses and /v1/messages
    on `app`."""
    catalog = ModelCatalog(service)

    async def answer(
        request: Request,
        schema: type[R],
        once: Callable[[ServedModel, R], Awaitable[dict[str, Any]]],
        streamed: Callable[[ServedModel, R], AsyncIterator[dict[str, Any]]],
    ) -> Response:
        try:
            body = await _body(request, schema)
            model = await asyncio.to_thread(catalog.get, body.model)
            if body.stream:
                return _sse(await _peeked(streamed(model, body)))
            return JSONResponse(await once(model, body))
        except UserError as e:
            return openai_error(error_message(e), e.status)
        except Exception as e:
            log.exception("kitchen serve: %s failed", request.url.path)
            return openai_error(f"{request.url.path}: {error_message(e)}", 500)

    @app.get("/v1/models")
    async def list_models() -> Response:
        return JSONResponse({"object": "list", "data": [_card(n) for n in catalog.names()]})

    @app.get("/v1/models/{name:path}")
    async def get_model(name: str) -> Response:
        try:
            await asyncio.to_thread(catalog.get, name)
        except UserError as e:
            return openai_error(error_message(e), 404)
        return JSONResponse(_card(name))

    @app.post("/v1/completions")
    async def completions(request: Request) -> Response:
        return await answer(
            request, CompletionRequest, completion_api.complete, completion_api.stream
        )

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> Response:
        return await answer(request, ChatRequest, chat_api.chat, chat_api.stream)

    from kitchen.serve.openai.translated import add_translated_routes  # it imports this module

    async def open_model(name: str, request: Request) -> tuple[ServedModel, Callable[[], None]]:
        """The model the chat route would answer `name` with, and what to call when done."""
        return await asyncio.to_thread(catalog.get, name), lambda: None

    add_translated_routes(app, open_model)


def _card(name: str) -> dict[str, Any]:
    return {"id": name, "object": "model", "created": 0, "owned_by": "kitchen"}
