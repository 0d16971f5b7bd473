import os

# A hub miss costs ~46 s of retries on a machine without internet; tests never reach the hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def _private_model_registry(tmp_path_factory, monkeypatch):
    # Runs register their models by default; tests never write into the user's data dir.
    monkeypatch.setenv("KITCHEN_REGISTRY", str(tmp_path_factory.mktemp("registry") / "registry.db"))


@pytest.fixture(scope="session")
def server_url(tmp_path_factory) -> Iterator[str]:
    """`kitchen serve` (its own process) with the tiny model preloaded, started once for the
    session: tinker_backend's and openai_serve's tests each started one, and a start imports torch
    and loads the model."""
    from tests.tinker_backend.conftest import TINY, serve_process

    with serve_process([TINY], tmp_path_factory.mktemp("serve-checkpoints")) as url:
        yield url
