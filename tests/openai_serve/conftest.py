"""`kitchen serve` (its own process, tiny model preloaded; the Tinker tests' fixture, started once
for this package too) and the official `openai` client on it."""

from __future__ import annotations

import pytest

from tests.tinker_backend.conftest import server_url

__all__ = ["client", "server_url"]


@pytest.fixture(scope="package")
def client(server_url: str):  # type: ignore[no-untyped-def]
    openai = pytest.importorskip("openai", reason="the openai client: pip install 'kitchen[eval]'")
    return openai.OpenAI(base_url=f"{server_url}/v1", api_key="unused", max_retries=0)
