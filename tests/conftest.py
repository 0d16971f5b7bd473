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


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Put each `xdist_group` on one worker under `--dist loadgroup`. pytest-xdist 3.8 groups a test
    by appending `@group` to `item._nodeid`, which pytest 9 no longer reads (the id lives in
    `item._id`): every group was split across both workers, and its module or package fixture (a
    `kitchen serve`, a traced recipe) ran once on each."""
    if not getattr(config.option, "loadgroup", False):
        return
    for item in items:
        groups = sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                         for m in item.iter_markers("xdist_group")})  # fmt: skip
        if groups and "@" not in item.nodeid:  # (a fixed xdist has added it already)
            item._id = type(item._id).parse(f"{item.nodeid}@{'_'.join(groups)}")  # type: ignore[attr-defined]


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
