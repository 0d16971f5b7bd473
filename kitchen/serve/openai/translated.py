"""The routes that are translations onto /v1/chat/completions: /v1/responses (responses.py) and
Anthropic's /v1/messages (messages.py). Each request is translated to a chat request, answered by
the chat route's own `chat` / `stream` on the model the chat route would use, and the answer
translated back; mistakes come back in each API's own error shape, naming the route's field.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Protocol

import pydantic
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from kitchen.serve.errors import UserError, error_message
from kitchen.serve.openai import chat as chat_api
from kitchen.serve.openai import messages as messages_api
from kitchen.serve.openai import responses as responses_api
from kitchen.serve.openai.fields import request_body
from kitchen.serve.openai.models import ServedModel
from kitchen.serve.openai.routes import _peeked, openai_error
from kitchen.serve.openai.schemas import ChatRequest

log = logging.getLogger("kitchen.serve.openai")

# (model name, request) -> the model, and what to call once its answer is complete.
OpenModel = Callable[[str, Request], Awaitable[tuple[ServedModel, Callable[[], None]]]]
ErrorShape = Callable[..., Response]  # (message, status, code=None, param=None)


class Translation(Protocol):
    """What responses.py and messages.py each provide."""

    CHAT_FIELDS: dict[str, str]

    def chat_request(self, body: dict[str, Any]) -> dict[str, Any]: ...

    def events(
        self, body: dict[str, Any], chunks: AsyncIterator[dict[str, Any]]
    ) -> AsyncIterator[dict[str, Any]]: ...


def anthropic_error(
    message: str, status: int = 400, code: str | None = None, param: str | None = None
) -> Response:
    """Anthropic's error shape (which has no code: the message names what was refused)."""
    kind = {404: "not_found_error", 500: "api_error"}.get(status, "invalid_request_error")
    body = {"type": "error", "error": {"type": kind, "message": message}}
    return JSONResponse(body, status_code=status)


def add_translated_routes(app: FastAPI, open_model: OpenModel) -> None:
    """Mount /v1/responses and /v1/messages on `app`."""

    async def translated(
        request: Request,
        api: Translation,
        reply: Callable[[dict[str, Any], dict[str, Any]], dict[str, Any]],
        error: ErrorShape,
    ) -> Response:
        route = request.url.path
        try:
            body = request_body(await request.body(), route)
            chat = _chat_request(api.chat_request(body), route, api.CHAT_FIELDS)
            model, done = await open_model(chat.model, request)
        except UserError as e:
            return error(_on(route, error_message(e)), e.status, e.code, e.param)
        try:
            if chat.stream:
                chunks = await _peeked(chat_api.stream(model, chat))
                events = _until_done(api.events(body, chunks), done)
                done = _nothing  # the stream calls it when it ends
                return _named_sse(events)
            return JSONResponse(reply(body, await chat_api.chat(model, chat)))
        except UserError as e:
            return error(_on(route, error_message(e)), e.status, e.code, e.param)
        except Exception as e:
            log.exception("kitchen serve: %s failed", route)
            return error(f"{route}: {error_message(e)}", 500)
        finally:
            done()

    @app.post("/v1/responses")
    async def responses(request: Request) -> Response:
        return await translated(request, responses_api, responses_api.response, openai_error)

    @app.post("/v1/messages")
    async def messages(request: Request) -> Response:
        return await translated(request, messages_api, messages_api.message, anthropic_error)


def _on(route: str, message: str) -> str:
    """`message` said of `route` (the chat route's own messages do not name it)."""
    return message if message.startswith(route) else f"{route}: {message}"


def _nothing() -> None:
    pass


def _chat_request(chat: dict[str, Any], route: str, names: dict[str, str]) -> ChatRequest:
    """The translated chat request, validated; a mistake names the route's own field."""
    try:
        return ChatRequest.model_validate(chat)
    except pydantic.ValidationError as e:
        first = e.errors()[0]
        loc = [str(x) for x in first["loc"]]
        where = ".".join([names.get(loc[0], loc[0]), *loc[1:]]) if loc else "body"
        raise UserError(f"{route}: {where}: {first['msg']}") from None


async def _until_done(
    events: AsyncIterator[dict[str, Any]], done: Callable[[], None]
) -> AsyncIterator[dict[str, Any]]:
    """`events`, then `done()` once they end (or fail, or the client goes away)."""
    try:
        async for event in events:
            yield event
    finally:
        done()


def _named_sse(events: AsyncIterator[dict[str, Any]]) -> StreamingResponse:
    """Events named by their type, as the Responses and Messages streams are (no [DONE])."""

    async def lines() -> AsyncIterator[str]:
        async for event in events:
            yield f"event: {event['type']}\ndata: {json.dumps(event)}\n\n"

    return StreamingResponse(lines(), media_type="text/event-stream")
