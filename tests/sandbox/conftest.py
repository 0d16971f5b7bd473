import os

import pytest

from kitchen.adapters.sandbox.local import LocalSandbox
from kitchen.ports.sandbox import SandboxUnavailable


@pytest.fixture(scope="session")
def sandbox():
    """The real local sandbox. A machine that cannot run it fails here, loudly: the project's
    set-up installs bubblewrap, and a skipped security suite would prove nothing."""
    box = LocalSandbox(max_concurrency=4)
    try:
        box.check()
    except SandboxUnavailable as e:
        pytest.fail(f"local sandbox unavailable: {e}")
    yield box
    box.close()


PROGRAM_ARGS = [b"-E", b"-s", b"-B", b"-X", b"utf8", b"main.py"]


def jailed_processes(programs_only: bool = False) -> list[int]:
    """Host pids of sandboxed programs (argv `python -E -s -B -X utf8 main.py`) and, unless
    `programs_only`, of the wrappers that start them (setpriv, time, prlimit, bwrap)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")[:-1]
        except OSError:
            continue
        is_program = len(argv) == 7 and argv[1:] == PROGRAM_ARGS
        is_wrapper = b"--json-status-fd" in argv and argv[-6:] == PROGRAM_ARGS
        if is_program or (is_wrapper and not programs_only):
            found.append(int(entry))
    return found
