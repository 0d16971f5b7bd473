"""What a client call returned, resolved: an awaitable (an APIFuture, a coroutine) is awaited, a
concurrent future is waited on, a plain value passes through. Clients written for the Tinker SDK,
for Kitchen's ports and for tests return any of the three."""

from __future__ import annotations

import inspect
from typing import Any


async def resolve_future(result: Any) -> Any:
    """The value behind `result`."""
    if inspect.isawaitable(result):
        return await result
    if callable(getattr(result, "result", None)):
        return result.result()
    return result
