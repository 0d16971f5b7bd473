"""Concurrent OpenAI requests for the same weights decode together in the engine's one batch."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx

from kitchen.serve.app import create_app
from kitchen.serve.service import KitchenService
from kitchen.serve.settings import ServeSettings
from tests.tinker_backend.conftest import TINY


def test_concurrent_requests_share_decode_steps(tmp_path: Path) -> None:
    service = KitchenService(ServeSettings(checkpoint_dir=tmp_path))
    service.preload(TINY)
    transport = httpx.ASGITransport(app=create_app(service))

    async def run() -> list[httpx.Response]:
        async with httpx.AsyncClient(transport=transport, base_url="http://serve") as http:
            chat = {"messages": [{"role": "user", "content": "Hello"}], "max_tokens": 24}
            jobs = [
                http.post(
                    "/v1/completions",
                    json={"model": TINY, "prompt": f"Row {i}:", "max_tokens": 24, "seed": i},
                )
                for i in range(3)
            ] + [http.post("/v1/chat/completions", json={"model": TINY, "seed": 9, **chat})]
            return list(await asyncio.gather(*jobs))

    try:
        responses = asyncio.run(run())
        assert [r.status_code for r in responses] == [200] * 4
        compute = service.backend.compute
        tokens = sum(r.json()["usage"]["completion_tokens"] for r in responses)
        # Alone, each request would take a decode step per token after its first.
        assert compute.batch.steps < tokens - len(responses)
        assert compute.batch.rows_stepped / compute.batch.steps > 1.5
    finally:
        service.close()
