"""The gateway's records over HTTP, per rollout address:

GET  /kitchen/v1/rollouts                   {"addresses": [...]}: addresses with calls
GET  /kitchen/v1/rollouts/<address>/calls   {"address", "calls": [CallRecord as JSON]}
POST /kitchen/v1/rollouts/<address>/take    the same, and the calls are removed
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from fastapi import FastAPI
from fastapi.responses import JSONResponse, Response

from kitchen.serve.gateway.rollouts import RolloutBook


def add_record_routes(app: FastAPI, book: RolloutBook) -> None:
    @app.get("/kitchen/v1/rollouts")
    async def addresses() -> Response:
        return JSONResponse({"addresses": book.addresses()})

    @app.get("/kitchen/v1/rollouts/{address}/calls")
    async def calls(address: str) -> Response:
        return JSONResponse(_body(address, book.peek(address)))

    @app.post("/kitchen/v1/rollouts/{address}/take")
    async def take(address: str) -> Response:
        return JSONResponse(_body(address, book.take(address)))


def _body(address: str, records: list[Any]) -> dict[str, Any]:
    return {"address": address, "calls": [asdict(r) for r in records]}
