"""The official `openai` client on `kitchen serve` (the session's server_url, tests/conftest.py,
which the Tinker tests share)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="package")
def client(server_url: str):  # type: ignore[no-untyped-def]
    openai = pytest.importorskip("openai", reason="the openai client: pip install 'kitchen[eval]'")
    return openai.OpenAI(base_url=f"{server_url}/v1", api_key="unused", max_retries=0)
