"""The local sandbox's ordinary behaviour: stdin, files, exit codes, verdicts, concurrency."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kitchen.adapters.sandbox import make_sandbox
from kitchen.adapters.sandbox.jail import split_time_report
from kitchen.adapters.sandbox.local import LocalSandbox
from kitchen.adapters.sandbox.verdict import classify
from kitchen.ports.sandbox import ExecutionResult, Limits, SandboxError, SandboxPort
from tests.sandbox.conftest import jailed_processes

REPO = Path(__file__).resolve().parents[2]


def test_local_sandbox_satisfies_the_port(sandbox):
    assert isinstance(sandbox, SandboxPort)


def test_stdin_and_files_reach_the_program(sandbox):
    program = "import helper, sys\nprint(helper.shout(sys.stdin.read()), open('data/x.txt').read())"
    result = sandbox.run(
        program,
        stdin="héllo",
        files={"helper.py": "def shout(s):\n    return s.upper()\n", "data/x.txt": "payload"},
    )
    assert result.reason == "ok", result.stderr
    assert result.stdout == "HÉLLO payload\n"
    assert result.exit_code == 0 and result.cpu_s is not None and result.cpu_s > 0


def test_exit_codes_and_reasons(sandbox):
    assert sandbox.run("raise SystemExit(3)").model_dump(include={"exit_code", "reason"}) == {
        "exit_code": 3,
        "reason": "runtime_error",
    }
    crashed = sandbox.run("raise ValueError('boom')")
    assert crashed.reason == "runtime_error" and "ValueError: boom" in crashed.stderr
    segv = sandbox.run("import ctypes\nctypes.string_at(0)")
    assert segv.reason == "killed" and segv.exit_code == 128 + 11


def test_peak_memory_tracks_the_program_not_the_host(sandbox):
    small = sandbox.run("print(1)")
    big = sandbox.run("x = bytearray(200 * 1024**2)\nx[::4096] = b'1' * len(x[::4096])")
    assert small.peak_memory_mb is not None and big.peak_memory_mb is not None
    assert small.peak_memory_mb < 40 < 200 < big.peak_memory_mb < 260


def test_work_dir_is_fresh_for_every_run(sandbox):
    sandbox.run("open('left.txt', 'w').write('x')")
    result = sandbox.run("import os\nprint(sorted(os.listdir('.')))")
    assert result.stdout == "['main.py', 'tmp']\n"


def test_bad_requests_raise(sandbox):
    with pytest.raises(SandboxError, match="language"):
        sandbox.run("x", language="cobol")
    with pytest.raises(SandboxError, match="relative path"):
        sandbox.run("x", files={"../escape.py": ""})
    with pytest.raises(SandboxError, match="reserved"):
        sandbox.run("x", files={"main.py": ""})
    with pytest.raises(SandboxError, match="unknown"):
        make_sandbox("docker")


def test_async_runs_are_bounded_by_max_concurrency():
    box = LocalSandbox(max_concurrency=2)
    program = "import time\nt = time.monotonic()\ntime.sleep(0.3)\nprint(t, time.monotonic())"

    async def many() -> list[ExecutionResult]:
        return await asyncio.gather(*(box.run_async(program) for _ in range(6)))

    t0 = time.monotonic()
    results = asyncio.run(many())
    box.close()
    assert all(r.reason == "ok" for r in results)
    spans = [tuple(map(float, r.stdout.split())) for r in results]
    most_at_once = max(sum(s <= t < e for s, e in spans) for t, _ in spans)
    assert most_at_once == 2  # CLOCK_MONOTONIC is shared with the jail
    assert time.monotonic() - t0 >= 0.9


def test_verdict_classification():
    def reason(**kw):
        base = dict(
            exit_code=0, started=True, killed_for=None, stderr_tail="", cpu_s=0.1, cpu_limit_s=2.0
        )
        return classify(**{**base, **kw})

    assert reason() == "ok"
    assert reason(started=False) == "sandbox_error"
    assert reason(exit_code=137, killed_for="output") == "output_limit"
    assert reason(exit_code=137, killed_for="wall") == "timeout"
    assert reason(exit_code=137, cpu_s=1.9) == "timeout"  # RLIMIT_CPU's SIGKILL
    assert reason(exit_code=137, cpu_s=0.1) == "killed"
    assert reason(exit_code=1, stderr_tail="...\nMemoryError\n") == "memory"
    assert reason(exit_code=1, stderr_tail="OSError: [Errno 27] File too large") == "output_limit"
    assert (
        reason(exit_code=1, stderr_tail="bwrap: execvp /usr/bin/python3: No such file")
        == "sandbox_error"
    )
    assert reason(exit_code=2) == "runtime_error"


def test_time_report_is_stripped_from_stderr():
    stderr = b"warning\nkitchen-sandbox-peak-kib=1 (forged)\nkitchen-sandbox-peak-kib=2048\n"
    head, tail, peak = split_time_report(stderr, stderr, truncated=False)
    assert peak == 2.0 and head == b"warning\nkitchen-sandbox-peak-kib=1 (forged)" == tail
    assert split_time_report(b"no report", b"no report", False) == (
        b"no report",
        b"no report",
        None,
    )


def test_limits_validate():
    with pytest.raises(ValueError):
        Limits(wall_s=0)
    with pytest.raises(ValueError):
        Limits(wall_s=1, typo=3)
    assert Limits(wall_s=3).cpu_limit_s == 3 and Limits(wall_s=3, cpu_s=1).cpu_limit_s == 1


def test_jail_dies_when_the_host_process_is_killed(sandbox):
    """A trainer that crashes (SIGKILL) mid-run leaves no sandboxed program behind."""
    script = (
        "import sys\n"
        "from kitchen.adapters.sandbox.local import LocalSandbox\n"
        "from kitchen.ports.sandbox import Limits\n"
        "LocalSandbox().run('import time\\ntime.sleep(60)', limits=Limits(wall_s=60))\n"
    )
    host = subprocess.Popen([sys.executable, "-c", script], cwd=str(REPO))
    try:
        deadline = time.monotonic() + 20
        while not jailed_processes(programs_only=True) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert jailed_processes(programs_only=True), "the sandboxed program never started"
        time.sleep(0.5)  # past start-up, when bwrap would die anyway writing to a closed pipe
    finally:
        host.kill()
        host.wait()
    deadline = time.monotonic() + 5
    while jailed_processes() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert jailed_processes() == []


def test_jail_binds_only_system_libraries_and_the_interpreter(sandbox):
    from kitchen.adapters.sandbox import jail

    interpreter = jail.probe_interpreter(jail.default_python())
    argv = jail.bwrap_args("bwrap", interpreter, Limits(), [(5, "main.py")], status_fd=6)
    for flag in (
        "--unshare-all",
        "--unshare-user",
        "--disable-userns",
        "--die-with-parent",
        "--as-pid-1",
    ):
        assert flag in argv
    assert "--share-net" not in argv and "--bind" not in argv and "--dev-bind" not in argv
    sources = [argv[i + 1] for i, a in enumerate(argv) if a in ("--ro-bind", "--ro-bind-try")]
    allowed = (
        "/usr/lib",
        "/usr/lib64",
        "/usr/lib32",
        "/usr/libx32",
        "/lib",
        "/lib64",
        *interpreter.ro_paths,
    )
    assert sources and all(src in allowed for src in sources), sources
    assert argv[-5:] == ["--remount-ro", "/dev", "--remount-ro", "/", "--"]  # read-only, last
