"""`make pytest` runs on pytest-xdist workers with `--dist loadgroup`: a module marked
`xdist_group` must land on one worker, so that its module fixture (a `kitchen serve`, a traced
recipe) starts once. Under pytest 9 with xdist 3.8 it did not, until tests/conftest.py's hook. The
tests marked serial run after the workers, in a pass that collects only their folders."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MODULE = """
import os, pytest
pytestmark = pytest.mark.xdist_group("one")
@pytest.fixture(scope="module", params=["a", "b"])
def started(request):
    with open(os.environ["SETUPS"], "a") as log:
        log.write(f"{request.param} {os.environ['PYTEST_XDIST_WORKER']}\\n")
    return request.param
def test_first(started): pass
def test_second(started): pass
def test_third(started): pass
"""


def pytest_in(folder: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """pytest run on `folder`, with the suite's own conftest (its hooks) as the suite's modules get it."""
    (folder / "conftest.py").write_text("from tests.conftest import *  # noqa: F403\n")
    cmd = [sys.executable, "-m", "pytest", "-q", *args, "-p", "no:cacheprovider"]
    cmd += ["--rootdir", str(folder), str(folder)]
    env = {**os.environ, "PYTHONPATH": str(ROOT), **env}
    return subprocess.run(cmd, cwd=folder, env=env, capture_output=True, text=True, timeout=120)


def test_a_grouped_module_fixture_is_set_up_once_per_param_on_one_worker(tmp_path: Path) -> None:
    pytest.importorskip("xdist")
    (tmp_path / "test_grouped.py").write_text(MODULE)
    setups = tmp_path / "setups.txt"
    done = pytest_in(tmp_path, "-n", "2", "--dist", "loadgroup", SETUPS=str(setups))
    assert done.returncode == 0, done.stdout[-2000:]
    assert "6 passed" in done.stdout
    lines = setups.read_text().split()
    params, workers = lines[0::2], set(lines[1::2])
    assert sorted(params) == ["a", "b"], setups.read_text()  # each param set up once
    assert len(workers) == 1, setups.read_text()


def test_the_serial_pass_collects_the_folders_the_conftest_allows() -> None:
    from tests.conftest import SERIAL_DIRS

    folders = re.search(r"^SERIAL_TESTS := (.*)$", (ROOT / "Makefile").read_text(), re.M)
    assert folders and tuple(folders.group(1).split()) == SERIAL_DIRS


def test_a_serial_test_outside_those_folders_is_refused_at_collection(tmp_path: Path) -> None:
    (tmp_path / "test_alone.py").write_text(
        "import pytest\n@pytest.mark.serial\ndef test_alone(): pass\n"
    )
    done = pytest_in(tmp_path, "--collect-only", "-p", "no:xdist")
    assert done.returncode == pytest.ExitCode.USAGE_ERROR, done.stdout[-2000:]
    assert "test_alone.py::test_alone: a serial test outside tests/sandbox" in done.stderr
