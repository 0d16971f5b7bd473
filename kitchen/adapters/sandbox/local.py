"""The local sandbox (default): each program runs in a fresh bubblewrap jail on this machine.

See `jail.py` for exactly what the program can see and `supervise.py` for how it is watched.
Needs the Debian packages bubblewrap (bwrap), util-linux (prlimit, setpriv) and python3, and a
kernel that allows unprivileged user namespaces; GNU time (package `time`) is optional and gives
peak memory.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import threading
from dataclasses import dataclass

from kitchen.adapters.sandbox import jail
from kitchen.adapters.sandbox.bounded import BoundedSandbox
from kitchen.adapters.sandbox.supervise import Spawn, supervise
from kitchen.adapters.sandbox.verdict import classify
from kitchen.ports.sandbox import (
    ExecutionResult,
    Limits,
    SandboxError,
    SandboxUnavailable,
    check_file_name,
)

LANGUAGES = ("python",)
# Fresh host uids for jails when running as root: high, far from real accounts and from
# the 65534 `nobody` that other services share.
_UID_LOW, _UID_HIGH = 1 << 24, 1 << 30


@dataclass(frozen=True)
class _Tools:
    bwrap: str
    prlimit: str
    setpriv: str
    gnu_time: str | None
    interpreter: jail.Interpreter


def _memfd(name: str, text: str) -> int:
    fd = os.memfd_create(name)  # close-on-exec; handed to one child via pass_fds
    data = text.encode("utf-8")
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


class LocalSandbox(BoundedSandbox):
    """Runs programs in bubblewrap jails: fresh user, PID, mount, network, IPC and UTS
    namespaces, a tmpfs work dir, rlimits, no network, read-only system libraries only."""

    name = "local"

    def __init__(
        self,
        *,
        python: str | None = None,
        max_concurrency: int | None = None,
        limits: Limits | None = None,
    ) -> None:
        super().__init__(max_concurrency or os.cpu_count() or 1, limits)
        self._python = python
        self._ready: _Tools | None = None
        self._ready_lock = threading.Lock()

    def check(self) -> ExecutionResult:
        """Start a jail once and run a trivial program; raises SandboxUnavailable if the machine
        cannot (bwrap missing, user namespaces disabled, interpreter unreadable)."""
        self._tools()
        return self.run("print('ok')")

    def _tools(self) -> _Tools:
        with self._ready_lock:
            if self._ready is None:
                self._ready = _Tools(
                    bwrap=jail.find_bwrap(),
                    prlimit=jail.find_util_linux("prlimit"),
                    setpriv=jail.find_util_linux("setpriv"),
                    gnu_time=jail.find_time(),
                    interpreter=jail.probe_interpreter(self._python or jail.default_python()),
                )
                probe = self._spawn("import sys; sys.stdout.write('ok')", "", {}, Limits())
                if probe.stdout != "ok":
                    self._ready = None
                    raise SandboxUnavailable(
                        "the local sandbox cannot start a jail on this machine: "
                        + (probe.stderr.strip().splitlines() or [probe.reason])[-1]
                    )
            return self._ready

    def _execute(
        self, program: str, language: str, stdin: str, files: dict[str, str], limits: Limits
    ) -> ExecutionResult:
        if language not in LANGUAGES:
            raise SandboxError(
                f"local sandbox language {language!r} is not supported; expected one of {LANGUAGES}"
            )
        for name in files:
            check_file_name(name)
        if jail.MAIN_FILE in files:
            raise SandboxError(f"sandbox file {jail.MAIN_FILE!r} is reserved for the program")
        self._tools()
        return self._spawn(program, stdin, files, limits)

    def _spawn(
        self, program: str, stdin: str, files: dict[str, str], limits: Limits
    ) -> ExecutionResult:
        assert self._ready is not None
        tools = self._ready
        fds: list[int] = []
        try:
            stdin_fd = _memfd("stdin", stdin)
            fds.append(stdin_fd)
            file_fds = []
            for rel, text in {jail.MAIN_FILE: program, **files}.items():
                fd = _memfd("file", text)
                fds.append(fd)
                file_fds.append((fd, rel))
            status_r, status_w = os.pipe()
            # As root each run gets a fresh host uid, so RLIMIT_NPROC counts this run only.
            uid = secrets.randbelow(_UID_HIGH - _UID_LOW) + _UID_LOW if os.geteuid() == 0 else None
            argv = [
                *jail.setpriv_args(tools.setpriv, uid),
                *(jail.time_args(tools.gnu_time) if tools.gnu_time else []),
                *jail.rlimit_args(
                    tools.prlimit,
                    limits,
                    wrappers=2 if tools.gnu_time else 1,
                    limit_processes=uid is not None,
                ),
                *jail.bwrap_args(tools.bwrap, tools.interpreter, limits, file_fds, status_w),
                *jail.python_command(tools.interpreter),
            ]
            spawn = Spawn(
                argv=argv,
                stdin_fd=stdin_fd,
                pass_fds=[status_w, *(fd for fd, _ in file_fds)],
                status_r=status_r,
                status_w=status_w,
                wall_s=limits.wall_s,
                max_output_bytes=limits.max_output_bytes,
            )
            out = supervise(spawn)
        finally:
            for fd in fds:
                with contextlib.suppress(OSError):
                    os.close(fd)
        head, tail, peak_mb = jail.split_time_report(
            bytes(out.stderr), out.stderr_tail, out.stderr_truncated
        )
        stderr = head.decode("utf-8", "replace")
        if out.spawn_error:
            stderr = out.spawn_error
        reason = classify(
            exit_code=out.exit_code,
            started=out.started,
            killed_for=out.killed_for,
            stderr_tail=tail.decode("utf-8", "replace"),
            cpu_s=out.cpu_s,
            cpu_limit_s=limits.cpu_limit_s,
        )
        return ExecutionResult(
            exit_code=out.exit_code if out.started else None,
            reason=reason,
            stdout=out.stdout.decode("utf-8", "replace"),
            stderr=stderr,
            stdout_truncated=out.stdout_truncated,
            stderr_truncated=out.stderr_truncated,
            wall_s=round(out.wall_s, 4),
            cpu_s=None if out.cpu_s is None else round(out.cpu_s, 4),
            peak_memory_mb=None if peak_mb is None else round(peak_mb, 2),
        )
