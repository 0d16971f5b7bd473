"""Rollout addresses on the wire: the header `X-Kitchen-Rollout: <address>`, or the path prefix
`/rollouts/<address>` before an OpenAI route (`/rollouts/<address>/v1/chat/completions`), which
the ASGI wrapper here turns into the header so the routes read one thing."""

from __future__ import annotations

import json
import re
from collections.abc import MutableMapping
from typing import Any

from kitchen.ports.agents import ROLLOUT_HEADER

_PREFIX = re.compile(r"^/rollouts/([^/]+)(/.*)$")
_HEADER = ROLLOUT_HEADER.lower().encode()


class RolloutPaths:
    """ASGI: /rollouts/<address>/<route> -> /<route> with the rollout header set."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        match = _PREFIX.match(scope.get("path", "")) if scope["type"] == "http" else None
        if match is None:
            await self.app(scope, receive, send)
            return
        address, rest = match.group(1), match.group(2)
        given = [v for k, v in scope.get("headers", []) if k.lower() == _HEADER]
        if any(v.decode("latin-1") != address for v in given):
            message = (
                f"{scope['path']}: the path addresses rollout {address!r} but the "
                f"{ROLLOUT_HEADER} header says {given[0].decode('latin-1')!r}; use one"
            )
            await _refuse(send, message)
            return
        headers = [(k, v) for k, v in scope.get("headers", []) if k.lower() != _HEADER]
        headers.append((_HEADER, address.encode("latin-1", "replace")))
        inner = {**scope, "path": rest, "raw_path": rest.encode(), "headers": headers}
        await self.app(inner, receive, send)


def rollout_path(address: str) -> str:
    """The path prefix of `address`'s OpenAI routes."""
    if not address or "/" in address:
        raise ValueError(f"rollout address {address!r}: expected a non-empty name without '/'")
    return f"/rollouts/{address}/v1"


async def _refuse(send: Any, message: str) -> None:
    body = {"error": {"message": message, "type": "invalid_request_error", "param": None}}
    raw = json.dumps(body).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 400,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", b"%d" % len(raw)),
            ],
        }
    )
    await send({"type": "http.response.body", "body": raw})
