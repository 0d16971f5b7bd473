"""Chat-completion chunks as the gateway streams them, shared by the /v1/responses and
/v1/messages translation tests: both turn the same chat stream into their own event sequence."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

from tests.tinker_backend.conftest import TINY

Events = Callable[[dict[str, Any], AsyncIterator[dict[str, Any]]], AsyncIterator[dict[str, Any]]]


def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def text_then_tool_call() -> list[dict[str, Any]]:
    """ "Hello" in two deltas, one tool call `get_time` with `{"a": 1}`, then usage 4 + 3."""
    call = {
        "id": "call_3",
        "type": "function",
        "function": {"name": "get_time", "arguments": '{"a": 1}'},
    }
    return [
        chunk({"role": "assistant", "content": ""}),
        chunk({"content": "Hel"}),
        chunk({"content": "lo"}),
        chunk({"tool_calls": [{"index": 0, **call}]}),
        chunk({}, "tool_calls"),
        {"choices": [], "usage": {"prompt_tokens": 4, "completion_tokens": 3, "total_tokens": 7}},
    ]


async def broken() -> AsyncIterator[dict[str, Any]]:
    """One text delta, then the sampler fails mid-stream."""
    yield chunk({"content": "a"})
    raise RuntimeError("the sampler went away")


async def _stream(items: list[dict[str, Any]]) -> AsyncIterator[dict[str, Any]]:
    for item in items:
        yield item


def collect(
    events: Events, chunks: list[dict[str, Any]] | AsyncIterator[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Every event `events` makes of `chunks` (a list, or a stream as it comes) for model TINY."""
    source = _stream(chunks) if isinstance(chunks, list) else chunks

    async def run() -> list[dict[str, Any]]:
        return [e async for e in events({"model": TINY}, source)]

    return asyncio.run(run())
