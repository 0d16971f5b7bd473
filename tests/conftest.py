import os

# A hub miss costs ~46 s of retries on a machine without internet; tests never reach the hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

# Under pytest-xdist (`make pytest`: 2 workers) the workers, and the kitchen processes they start,
# share the cores: one intra-op thread each and an OpenMP that sleeps instead of spinning, set before
# torch is first imported (spinning made two torch processes on 2 cores each 20-40x slower).
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


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
