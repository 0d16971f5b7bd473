"""The one walk over a chat completion stream that the translated routes share (responses.py,
messages.py): the usage is kept, each text delta, tool call and finishing choice goes to the
route's own translation, and a failure after the first event (the headers are sent) travels as
the route's own error events. A translation's methods are generators, so the events it makes
before a failure still reach the client.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator
from typing import Any, Protocol

from kitchen.serve.errors import error_message

log = logging.getLogger("kitchen.serve.openai")

Event = dict[str, Any]


class StreamTranslation(Protocol):
    """What one API streams for each part of a chat stream."""

    what: str  # the API's word for one answer, for the log line of a failure

    def start(self) -> Iterator[Event]: ...

    def text(self, text: str) -> Iterator[Event]: ...

    def call(self, call: dict[str, Any]) -> Iterator[Event]: ...

    def finish(self, choice: dict[str, Any]) -> Iterator[Event]: ...

    def end(self, usage: dict[str, int] | None) -> Iterator[Event]: ...

    def failed(self, message: str, code: str | None = None) -> Iterator[Event]:
        """`code`: the refusal's own (rollout_budget_exceeded), None for a server failure."""
        ...


async def translated_events(
    chunks: AsyncIterator[dict[str, Any]], into: StreamTranslation
) -> AsyncIterator[Event]:
    """The events of `into` for the chat stream `chunks` (asked with include_usage)."""
    for event in into.start():
        yield event
    usage = None
    try:
        async for chunk in chunks:
            usage = chunk.get("usage") or usage
            for choice in chunk.get("choices") or []:
                delta = choice.get("delta") or {}
                if delta.get("content"):
                    for event in into.text(delta["content"]):
                        yield event
                for call in delta.get("tool_calls") or []:
                    for event in into.call(call):
                        yield event
                if choice.get("finish_reason"):
                    for event in into.finish(choice):
                        yield event
    except Exception as e:  # headers are sent: the failure travels as events
        log.warning("kitchen serve: a streamed %s failed: %s", into.what, e)
        for event in into.failed(error_message(e), getattr(e, "code", None)):
            yield event
        return
    for event in into.end(usage):
        yield event
