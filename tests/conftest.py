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

# Fixtures shared across tests that each cost seconds (a `kitchen serve` process, a model, trained
# runs, a converted tokenizer), as "baseid::name". Under `--dist loadgroup` tests without a group are
# dealt to both workers, so each worker built its own copy (the suite's durations showed two
# `kitchen serve` and two SmolLM2 tokenizer setups); their users are kept on one worker instead.
_ONE_WORKER_FIXTURES = {
    "tests::server_url",
    "tests/renderers::smollm2_tokenizer",
    "tests/serve_hardening::server",
    "tests/report::runs",
    "tests/sandbox/test_http.py::service_url",
    "tests/export/test_export.py::backend",
    "tests/evaluation/test_inspect_evaluator.py::tiny_run",
    "tests/agents/test_gateway.py::training",
}


# `make pytest` runs the tests marked serial in a second pass over these folders only: collecting
# the whole suite again made that pass 52 s instead of 36 s.
SERIAL_DIRS = ("tests/sandbox",)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("serial") and not any(
            item.path.is_relative_to(config.rootpath / folder) for folder in SERIAL_DIRS
        ):
            raise pytest.UsageError(
                f"{item.nodeid}: a serial test outside {', '.join(SERIAL_DIRS)} would not run in "
                "make pytest's serial pass; move it, or add its folder to SERIAL_DIRS in "
                "tests/conftest.py and SERIAL_TESTS in the Makefile"
            )
        if item.get_closest_marker("xdist_group") is None:
            info = getattr(item, "_fixtureinfo", None)
            for name in info.names_closure if info is not None else ():
                defs = info.name2fixturedefs.get(name, ())
                key = f"{defs[-1].baseid}::{name}" if defs else ""
                if key in _ONE_WORKER_FIXTURES:
                    item.add_marker(pytest.mark.xdist_group(key))
                    break
    if getattr(config.option, "loadgroup", False):  # an xdist worker under --dist loadgroup
        _suffix_groups(items)


def _suffix_groups(items: list[pytest.Item]) -> None:
    """Put each `xdist_group` on one worker. pytest-xdist 3.8 groups a test by appending `@group` to
    `item._nodeid`, which pytest 9 no longer reads (the id lives in `item._id`): every group was
    split across both workers, and its module or package fixture (a `kitchen serve`, a traced
    recipe) ran once on each. The suffix goes where pytest 9 reads it."""
    for item in items:
        names = sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                        for m in item.iter_markers("xdist_group")})  # fmt: skip
        if names and "@" not in item.nodeid:  # (a fixed xdist has added it already)
            item._id = type(item._id).parse(f"{item.nodeid}@{'_'.join(names)}")  # type: ignore[attr-defined]


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
