"""One `kitchen serve` app (the local engine, the tiny model) on a loopback port in a thread of the
test process, requiring an API key, with a small body limit and one allow-listed folder."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

TINY = "kitchen/tiny-llama"
KEY = "tml-hardening-test"
MAX_BODY = 2**20


@dataclass
class Server:
    url: str
    checkpoint_dir: Path
    allowed: Path

    @property
    def headers(self) -> dict[str, str]:
        return {"X-API-Key": KEY}


@pytest.fixture(scope="package")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    from kitchen.serve import ServeSettings, serving

    root = tmp_path_factory.mktemp("serve")
    allowed = root / "allowed"
    allowed.mkdir()
    settings = ServeSettings(
        port=0,
        preload=[TINY],
        require_key=True,
        api_key=KEY,
        checkpoint_dir=root / "engine",
        allowed_checkpoint_dirs=[allowed],
        max_body_bytes=MAX_BODY,
        threads=1,
    )
    with serving(settings) as url:
        yield Server(url, root / "engine", allowed)


@pytest.fixture
def sdk(server: Server, monkeypatch: pytest.MonkeyPatch) -> Iterator[object]:
    import tinker

    monkeypatch.setenv("TINKER_API_KEY", KEY)
    monkeypatch.setenv("TINKER_BASE_URL", server.url)
    client = tinker.ServiceClient()
    yield client
    client.close("success").result()
