"""Hostile programs against the real local sandbox: each is contained, reported as a failure with
a reason, and leaves the host as it was."""

from __future__ import annotations

import ast
import asyncio
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cookbook.envs.sandbox_grading import StdioCase, grade_stdio
from kitchen.ports.sandbox import Limits
from tests.sandbox.conftest import jailed_processes

# alone (`make pytest`'s serial pass): the leak check counts every sandboxed process on the machine,
# another xdist worker's too
pytestmark = pytest.mark.serial

REPO = Path(__file__).resolve().parents[2]
FAST = Limits(wall_s=3.0, cpu_s=2.0)


@pytest.fixture(autouse=True)
def no_leftovers():
    yield
    assert jailed_processes() == [], "a sandboxed process outlived its run"


def clean_stdout(sandbox, program: str, limits: Limits = FAST) -> str:
    """The stdout of a run that must end normally (the hostile act inside it only failing)."""
    result = sandbox.run(program, limits=limits)
    assert result.reason == "ok", result.stderr
    return result.stdout


def try_each_path(targets: list[str], act: str) -> str:
    """A program running statement `act` on each `path` of `targets`; an OSError prints DENIED."""
    return (
        f"for path in {targets!r}:\n"
        "    try:\n"
        f"        {act}\n"
        "    except OSError as e:\n"
        "        print('DENIED', path, type(e).__name__)\n"
    )


def test_cannot_read_host_files(sandbox, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("hunter2-secret")
    targets = [
        str(secret),
        str(REPO / "pyproject.toml"),
        "/etc/passwd",
        "/root/.bashrc",
        f"/proc/{os.getpid()}/environ",
    ]
    stdout = clean_stdout(
        sandbox, try_each_path(targets, "print('READ', path, open(path).read()[:100])")
    )
    assert "READ" not in stdout
    assert stdout.count("DENIED") == len(targets)
    # Graded as a solution whose expected answer is the secret, it fails, with the reason.
    report = asyncio.run(
        grade_stdio(
            sandbox,
            f"print(open({str(secret)!r}).read())",
            [StdioCase(input="", output="hunter2-secret")],
        )
    )
    assert not report.passed_all
    assert "FileNotFoundError" in report.cases[0].reason


def test_cannot_write_outside_work_dir(sandbox, tmp_path):
    existing = tmp_path / "keep.txt"
    existing.write_text("original")
    targets = [
        str(existing),
        str(tmp_path / "new.txt"),
        str(REPO / "pwned.txt"),
        "/usr/lib/pwned",
        "/pwned",
    ]
    program = (
        try_each_path(targets, "open(path, 'w').write('pwned'); print('WROTE', path)")
        + "open('/tmp/inside.txt', 'w').write('fine')\n"  # the jail's own /tmp: allowed, thrown away
        + "print('TMP', open('/tmp/inside.txt').read())\n"
    )
    stdout = clean_stdout(sandbox, program)
    assert "WROTE" not in stdout and "TMP fine" in stdout
    assert existing.read_text() == "original"
    assert not (tmp_path / "new.txt").exists() and not (REPO / "pwned.txt").exists()
    assert not Path("/tmp/inside.txt").exists() and not Path("/pwned").exists()


def test_host_environment_is_not_inherited(sandbox, monkeypatch):
    monkeypatch.setenv("TINKER_API_KEY", "tml-very-secret")
    environment = clean_stdout(sandbox, "import os; print(sorted(os.environ.items()))")
    assert "tml-very-secret" not in environment


def test_cannot_reach_host_loopback_listener(sandbox):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    listener.setblocking(False)
    port = listener.getsockname()[1]
    try:
        program = (
            "import socket\n"
            "s = socket.socket()\n"
            "s.settimeout(2)\n"
            f"s.connect(('127.0.0.1', {port}))\n"
            "print('CONNECTED')\n"
        )
        result = sandbox.run(program, limits=FAST)
        assert result.reason == "runtime_error"
        assert "ConnectionRefusedError" in result.stderr and "CONNECTED" not in result.stdout
        with pytest.raises(BlockingIOError):
            listener.accept()  # nobody knocked
    finally:
        listener.close()


def test_public_address_is_unreachable_at_once(sandbox):
    # The jail's network namespace has only its own loopback and no route, so connect fails
    # with ENETUNREACH before any packet exists; the host sends nothing anywhere.
    program = (
        "import socket, time\n"
        "t = time.monotonic()\n"
        "try:\n"
        "    socket.create_connection(('1.1.1.1', 80), timeout=5)\n"
        "    print('CONNECTED')\n"
        "except OSError as e:\n"
        "    print('FAILED', e.errno, round(time.monotonic() - t, 3))\n"
        "try:\n"
        "    socket.getaddrinfo('example.com', 80)\n"
        "    print('RESOLVED')\n"
        "except OSError as e:\n"
        "    print('NO DNS')\n"
    )
    stdout = clean_stdout(sandbox, program)
    words = stdout.split()
    assert words[0] == "FAILED" and int(words[1]) == 101  # ENETUNREACH
    assert float(words[2]) < 0.5
    assert "NO DNS" in stdout


def test_fork_bomb_is_contained(sandbox):
    bomb = (
        "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
    )
    t0 = time.monotonic()
    result = sandbox.run(bomb, limits=Limits(wall_s=2.0, max_processes=16))
    assert result.reason == "timeout"
    assert time.monotonic() - t0 < 6
    # The host can still start processes at once.
    assert subprocess.run(["true"], timeout=5).returncode == 0


def test_process_count_is_limited(sandbox):
    program = (
        "import os, time\n"
        "n = 0\n"
        "try:\n"
        "    for _ in range(200):\n"
        "        if os.fork() == 0:\n"
        "            time.sleep(30)\n"
        "            os._exit(0)\n"
        "        n += 1\n"
        "except OSError as e:\n"
        "    print('LIMIT', n, e.errno)\n"
    )
    stdout = clean_stdout(sandbox, program, Limits(wall_s=5.0, max_processes=10))
    words = stdout.split()
    # max_processes counts the program itself: 9 children, then EAGAIN
    assert words[0] == "LIMIT" and int(words[1]) == 9 and int(words[2]) == 11


def test_infinite_loop_times_out(sandbox):
    result = sandbox.run("while True:\n    pass\n", limits=Limits(wall_s=1.5, cpu_s=1.0))
    assert result.reason == "timeout"
    assert result.wall_s < 3.0
    report = asyncio.run(
        grade_stdio(
            sandbox,
            "while True:\n    pass\n",
            [StdioCase(input="", output="1")],
            limits=Limits(wall_s=1.0),
        )
    )
    assert not report.passed_all and report.cases[0].reason.startswith("timeout")


def test_allocating_10_gb_fails_with_memory(sandbox):
    result = sandbox.run("x = bytearray(10 * 1024**3)\nprint('ALLOCATED')", limits=FAST)
    assert result.reason == "memory" and "ALLOCATED" not in result.stdout
    creeping = "chunks = []\nwhile True:\n    chunks.append(bytearray(64 * 1024**2))\n"
    result = sandbox.run(creeping, limits=Limits(wall_s=5.0, memory_mb=256))
    assert result.reason == "memory"
    assert result.peak_memory_mb is None or result.peak_memory_mb < 256


def test_1_gb_of_output_is_cut_off(sandbox):
    program = "import sys\nchunk = b'x' * (1 << 20)\nfor _ in range(1024):\n    sys.stdout.buffer.write(chunk)\n"
    result = sandbox.run(program, limits=Limits(wall_s=10.0, max_output_bytes=4 << 20))
    assert result.reason == "output_limit"
    assert result.stdout_truncated and len(result.stdout) <= 4 << 20
    assert result.wall_s < 5.0
    to_stderr = program.replace("stdout", "stderr")
    result = sandbox.run(to_stderr, limits=Limits(wall_s=10.0, max_output_bytes=4 << 20))
    assert result.reason == "output_limit" and result.stderr_truncated
    to_file = "chunk = b'x' * (1 << 20)\nwith open('big.bin', 'wb') as f:\n    for _ in range(1024):\n        f.write(chunk)\n"
    result = sandbox.run(to_file, limits=Limits(wall_s=10.0, max_file_mb=8))
    assert result.reason == "output_limit" and "File too large" in result.stderr


def test_sleeping_past_the_limit_is_killed(sandbox):
    result = sandbox.run("import time\ntime.sleep(60)\nprint('WOKE')", limits=Limits(wall_s=1.0))
    assert result.reason == "timeout" and "WOKE" not in result.stdout
    assert 1.0 <= result.wall_s < 2.5


def test_killing_its_parent_or_anything_else_fails(sandbox):
    canary = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        program = (
            "import os, signal\n"
            f"targets = [os.getppid(), {os.getpid()}, {canary.pid}, 1]\n"
            "for pid in targets:\n"
            "    try:\n"
            "        os.kill(pid, signal.SIGKILL)\n"
            "        print('SENT', pid)\n"
            "    except OSError as e:\n"
            "        print('REFUSED', pid, type(e).__name__)\n"
            "try:\n"
            "    os.kill(-1, signal.SIGKILL)\n"  # all it may signal: nothing outside its namespace
            "except OSError as e:\n"
            "    print('NOTHING TO KILL', type(e).__name__)\n"
            "print('STILL HERE')\n"
        )
        result = sandbox.run(program, limits=FAST)
        assert canary.poll() is None, "a sandboxed program killed a host process"
        assert (
            f"REFUSED {canary.pid}" in result.stdout and f"REFUSED {os.getpid()}" in result.stdout
        )
        assert result.reason == "ok" and "NOTHING TO KILL ProcessLookupError" in result.stdout
    finally:
        canary.kill()
        canary.wait()


def test_background_processes_die_with_the_run(sandbox):
    program = (
        "import os, sys, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        "        time.sleep(60)\n"
        "    os._exit(0)\n"
        "print('parent done')\n"
    )
    t0 = time.monotonic()
    assert clean_stdout(sandbox, program, Limits(wall_s=10.0)) == "parent done\n"
    assert time.monotonic() - t0 < 3.0  # the daemon neither outlives nor delays the run
    assert jailed_processes() == []


def test_jail_has_no_privileges(sandbox):
    program = (
        "import os\n"
        "status = dict(l.split(':\\t', 1) for l in open('/proc/self/status').read().splitlines() if ':\\t' in l)\n"
        "print(status['CapEff'].strip(), status['NoNewPrivs'].strip(), os.getuid() != 0)\n"
        "print(sorted(p for p in os.listdir('/proc') if p.isdigit()))\n"
        "print(sorted(os.listdir('/')))\n"
    )
    stdout = clean_stdout(sandbox, program)
    caps, pids, root = stdout.splitlines()
    assert caps == "0000000000000000 1 True"
    assert pids == "['1']"  # its own PID namespace: it sees only itself
    visible = set(ast.literal_eval(root))
    assert {"sandbox", "usr", "proc", "dev", "tmp"} <= visible
    assert visible <= {"sandbox", "usr", "proc", "dev", "tmp", "lib", "lib64", "lib32", "libx32"}
