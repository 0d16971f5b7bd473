"""Kitchen processes share cores instead of spinning on them (issue 34): a process that shares the
machine makes torch's OpenMP runtime wait passively, one that is alone keeps the (faster) default,
and a policy the user set is kept. libgomp prints the spin count it actually uses under
OMP_DISPLAY_ENV=VERBOSE, so the subprocess tests read what torch's runtime took."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from kitchen.engine.cores import DecideBeforeTorch, choose_wait_policy, find_peers, rank_threads

linux_only = pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="needs Linux /proc")


def _not_asked() -> list[int] | None:
    raise AssertionError("the environment decides; the processes need not be looked for")


def test_a_policy_the_user_set_wins() -> None:
    for env in ({"OMP_WAIT_POLICY": "ACTIVE"}, {"GOMP_SPINCOUNT": "300000"}):
        assert choose_wait_policy(env, _not_asked).value is None


def test_alone_keeps_openmps_default() -> None:
    assert choose_wait_policy({}, lambda: []).value is None
    assert choose_wait_policy({"LOCAL_WORLD_SIZE": "1"}, lambda: []).value is None


def test_another_process_makes_it_wait_passively() -> None:
    policy = choose_wait_policy({}, lambda: [4242])
    assert policy.value == "PASSIVE" and "4242" in policy.reason


def test_ranks_on_one_machine_wait_passively() -> None:
    assert choose_wait_policy({"LOCAL_WORLD_SIZE": "2"}, _not_asked).value == "PASSIVE"


def test_where_processes_cannot_be_looked_for_it_waits_passively() -> None:
    assert choose_wait_policy({}, lambda: None).value == "PASSIVE"


def test_ranks_on_one_machine_split_its_cores() -> None:
    assert rank_threads({}, cores=16, local_ranks=2) == "8"
    assert rank_threads({}, cores=2, local_ranks=2) == "1"
    assert rank_threads({}, cores=2, local_ranks=4) == "1"  # never 0
    assert rank_threads({"OMP_NUM_THREADS": "3"}, cores=16, local_ranks=2) == "3"


def test_the_policy_is_chosen_as_torch_is_first_imported() -> None:
    calls: list[str] = []
    hook = DecideBeforeTorch(lambda: calls.append("decided"))
    assert hook.find_spec("numpy", None) is None and calls == []
    assert hook.find_spec("torch", None) is None and calls == ["decided"]  # finds nothing itself
    hook.find_spec("torch", None)
    assert calls == ["decided"]  # once


def _fake_process(proc: Path, pid: int, ppid: int, maps: str, name: str = "python") -> None:
    (proc / str(pid)).mkdir()
    (proc / str(pid) / "stat").write_text(f"{pid} ({name}) S {ppid} 0 0\n")
    (proc / str(pid) / "maps").write_text(maps)


def test_peers_are_processes_with_openmp_or_kitchen_mapped_but_not_ancestors(
    tmp_path: Path,
) -> None:
    gomp = "7f00-7f01 r-xp 0 08:01 12 /venv/torch/lib/libgomp-a34b3233.so.1\n"
    _fake_process(tmp_path, os.getpid(), 77, "", name="py thon (test)")  # a name with ") "
    _fake_process(tmp_path, 77, 78, gomp)  # the parent: a launcher or test waiting on us
    _fake_process(tmp_path, 78, 1, gomp)  # the grandparent, whose stat does not parse
    (tmp_path / "78" / "stat").write_text("garbage")
    _fake_process(tmp_path, 101, 1, gomp)
    _fake_process(tmp_path, 102, 1, "7f00-7f01 r-xp 0 08:01 13 /usr/lib/libc.so.6\n")
    _fake_process(tmp_path, 103, 1, "7f00-7f01 r--s 0 00:1f 14 /run/user/0/kitchen-cores-0\n")
    _fake_process(tmp_path, 104, 1, "7f00-7f01 r-xp 0 08:01 15 /opt/intel/libiomp5.so\n")
    (tmp_path / "105").mkdir()  # gone, or not ours to read
    (tmp_path / "self").mkdir()
    assert find_peers(tmp_path) == [101, 103, 104]


def test_without_proc_peers_are_unknown(tmp_path: Path) -> None:
    assert find_peers(tmp_path / "nowhere") is None


def _child_env(**extra: str) -> dict[str, str]:
    drop = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "LOCAL_WORLD_SIZE")
    return {k: v for k, v in os.environ.items() if k not in drop} | extra


def _start_kitchen_process(then: str = "sys.stdin.readline()") -> subprocess.Popen[str]:
    """A process that has imported kitchen and not torch (one still starting up), once it has
    printed a line; it runs `then` when a line is written to it."""
    code = f"import kitchen, sys; print('torch' in sys.modules, flush=True); {then}"
    proc = subprocess.Popen(
        [sys.executable, "-c", code],
        env=_child_env(OMP_DISPLAY_ENV="VERBOSE"),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "False"
    return proc


@pytest.fixture
def kitchen_peer() -> Iterator[int]:
    peer = _start_kitchen_process()
    try:
        yield peer.pid
    finally:
        peer.kill()
        peer.communicate()


@pytest.mark.slow  # launches a process
@linux_only
def test_a_kitchen_process_is_seen_before_it_loads_torch(kitchen_peer: int) -> None:
    peers = find_peers()
    assert peers is not None and kitchen_peer in peers
    assert os.getpid() not in peers


def _spin_count(code: str, env: dict[str, str]) -> int:
    proc = subprocess.run(
        [sys.executable, "-c", code],
        env=env | {"OMP_DISPLAY_ENV": "VERBOSE"},
        capture_output=True,
        text=True,
        check=True,
    )
    found = re.search(r"GOMP_SPINCOUNT = '(\d+)'", proc.stderr)
    assert found, proc.stderr[-2000:]
    return int(found.group(1))


@pytest.mark.slow  # launches a process
@linux_only
def test_beside_another_kitchen_process_torch_waits_passively(kitchen_peer: int) -> None:
    # every entry (the CLI, serve, kitchen.app.launch, bench scripts) imports the kitchen package first
    assert _spin_count("import kitchen.app.cli; import torch", _child_env()) == 0


@pytest.mark.slow  # launches a process
@linux_only
def test_a_kitchen_process_that_started_after_this_one_imported_kitchen_counts() -> None:
    # two started together: each sees the other when it loads torch, so neither spins
    first = _start_kitchen_process(then="sys.stdin.readline(); import torch")
    second = _start_kitchen_process()
    try:
        _, err = first.communicate("go\n", timeout=300)
    finally:
        second.kill()
        second.communicate()
    found = re.search(r"GOMP_SPINCOUNT = '(\d+)'", err)
    assert found and int(found.group(1)) == 0, err[-2000:]


@pytest.mark.slow  # launches a process
def test_without_kitchen_torch_spins() -> None:
    # the default the PASSIVE policy replaces, so the tests above can tell the difference
    assert _spin_count("import torch", _child_env()) > 0


@pytest.mark.slow  # launches a process
def test_a_policy_the_user_set_is_kept() -> None:
    assert (
        _spin_count("import kitchen; import torch", _child_env(OMP_WAIT_POLICY="ACTIVE")) > 300_000
    )
