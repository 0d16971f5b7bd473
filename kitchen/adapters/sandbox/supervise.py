"""Start the jailed process tree, stream its output under a byte budget, enforce the wall clock,
and collect exit status and CPU time.

Killing is a SIGKILL to the PID namespace's init (the program itself; its host pid arrives on
bwrap's json-status fd and is pinned with a pidfd): the kernel then kills every process in the
namespace, and the outer bwrap still reaps init, so the CPU time of the tree reaches our wait4().
Before the program has started, the outer chain is killed instead (--die-with-parent does the rest).
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from kitchen.engine.cores import parent_pid

STDERR_HEAD_BYTES = 64 * 1024
STDERR_TAIL_BYTES = 4 * 1024
_READ_CHUNK = 64 * 1024
_DRAIN_S = 2.0  # after a kill, how long to wait for the pipes to close


@dataclass
class Spawn:
    """How to start one jailed run: the argv (prlimit + bwrap + program) and what to pass to it."""

    argv: list[str]
    stdin_fd: int
    pass_fds: Sequence[int]  # the status pipe's write end and the files' fds
    status_r: int  # json-status pipe (bwrap writes child-pid and exit-code events)
    status_w: int
    wall_s: float
    max_output_bytes: int


@dataclass
class Outcome:
    """Raw facts about a finished run; `verdict.classify` turns them into a reason."""

    exit_code: int | None = None  # bwrap's status: the program's code, or 128+signal
    started: bool = False  # bwrap reported the jailed child's pid
    killed_for: Literal["wall", "output"] | None = None
    stdout: bytearray = field(default_factory=bytearray)
    stderr: bytearray = field(default_factory=bytearray)
    stderr_tail: bytes = b""
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    wall_s: float = 0.0
    cpu_s: float | None = None  # user + system of the whole tree (wait4 of our direct child)
    spawn_error: str | None = None


class _Run:
    def __init__(self, spawn: Spawn) -> None:
        self.spawn = spawn
        self.out = Outcome()
        self.total_bytes = 0
        self.status_buf = b""
        self.init_pidfd: int | None = None
        self.proc: subprocess.Popen[bytes] | None = None
        self.reaped = False

    def start(self) -> None:
        s = self.spawn
        # No user=/group= here (setpriv drops privileges): without them Popen can vfork.
        self.proc = subprocess.Popen(
            s.argv,
            stdin=s.stdin_fd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            pass_fds=tuple(s.pass_fds),
            cwd="/",
            env={"PATH": "/usr/bin:/bin"},
            start_new_session=True,  # the terminal's Ctrl-C reaches us, not the jail directly
        )

    def on_stdout(self, chunk: bytes) -> None:
        room = self.spawn.max_output_bytes - len(self.out.stdout)
        if len(chunk) > room:
            self.out.stdout_truncated = True
        self.out.stdout += chunk[: max(room, 0)]

    def on_stderr(self, chunk: bytes) -> None:
        room = STDERR_HEAD_BYTES - len(self.out.stderr)
        if len(chunk) > room:
            self.out.stderr_truncated = True
        self.out.stderr += chunk[: max(room, 0)]
        self.out.stderr_tail = (self.out.stderr_tail + chunk)[-STDERR_TAIL_BYTES:]

    def on_status(self, chunk: bytes) -> None:
        # bwrap writes one JSON object per line: {"child-pid": N, ...} then {"exit-code": N}.
        self.status_buf += chunk
        *lines, self.status_buf = self.status_buf.split(b"\n")
        for line in lines:
            with contextlib.suppress(ValueError):
                event = json.loads(line)
                if "child-pid" in event:
                    self.out.started = True
                    self._open_init(int(event["child-pid"]))
                if "exit-code" in event:
                    self.out.exit_code = int(event["exit-code"])

    def _open_init(self, pid: int) -> None:
        """A pidfd pins the process; checking its parent is the outer bwrap rules out pid reuse."""
        assert self.proc is not None
        try:
            fd = os.pidfd_open(pid)
        except OSError:
            return
        ancestor = pid
        for _ in range(4):  # init <- outer bwrap <- (GNU time) <- our child
            ancestor = parent_pid(ancestor)
            if ancestor == self.proc.pid:
                self.init_pidfd = fd
                return
            if ancestor <= 1:
                break
        os.close(fd)

    def kill(self, why: Literal["wall", "output"]) -> None:
        if self.out.killed_for is None:
            self.out.killed_for = why
        assert self.proc is not None
        if self.reaped:
            return
        if self.init_pidfd is not None:
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(self.init_pidfd, signal.SIGKILL)
        else:  # not started yet: --die-with-parent takes the rest down with the outer bwrap
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, signal.SIGKILL)

    def pump(self, deadline: float) -> None:
        """Read stdout, stderr and the status pipe until all close, killing on limits."""
        assert self.proc is not None and self.proc.stdout and self.proc.stderr
        handlers = {
            self.proc.stdout.fileno(): self.on_stdout,
            self.proc.stderr.fileno(): self.on_stderr,
        }
        status_r = self.spawn.status_r
        handlers[status_r] = self.on_status
        sel = selectors.DefaultSelector()
        for fd in handlers:
            os.set_blocking(fd, False)
            sel.register(fd, selectors.EVENT_READ)
        hard_stop: float | None = None
        try:
            while sel.get_map():
                now = time.monotonic()
                if self.out.killed_for is None and now >= deadline:
                    self.kill("wall")
                if self.out.killed_for is not None:
                    hard_stop = hard_stop or now + _DRAIN_S
                    if now >= hard_stop:
                        break
                wait = (hard_stop if hard_stop is not None else deadline) - now
                for key, _ in sel.select(timeout=max(wait, 0.0)):
                    fd = int(key.fd)
                    try:
                        chunk = os.read(fd, _READ_CHUNK)
                    except BlockingIOError:
                        continue
                    if not chunk:
                        sel.unregister(fd)
                        continue
                    handlers[fd](chunk)
                    if fd != status_r:
                        self.total_bytes += len(chunk)
                        if self.total_bytes > self.spawn.max_output_bytes:
                            self.kill("output")
        finally:
            sel.close()

    def reap(self, deadline: float) -> None:
        """wait4 the outer bwrap; kill first if it outlives the deadline."""
        assert self.proc is not None
        pid = self.proc.pid
        while True:
            got, status, usage = os.wait4(pid, os.WNOHANG)
            if got == pid:
                break
            if time.monotonic() >= deadline:
                self.kill("wall")
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                got, status, usage = os.wait4(pid, 0)
                break
            time.sleep(0.002)
        self.reaped = True
        self.proc.returncode = os.waitstatus_to_exitcode(status)  # keep Popen from reaping again
        if self.out.exit_code is None and self.proc.returncode is not None:
            code = self.proc.returncode
            self.out.exit_code = 128 - code if code < 0 else code
        # Not ru_maxrss: a forked child starts from its parent's resident set, so ours would be
        # the floor of every reading; the caller measures peak memory one fork further down.
        self.out.cpu_s = usage.ru_utime + usage.ru_stime

    def close(self) -> None:
        if self.proc is not None:
            if not self.reaped:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self.proc.pid, signal.SIGKILL)
                with contextlib.suppress(ChildProcessError):
                    os.wait4(self.proc.pid, 0)
                self.reaped = True
            for stream in (self.proc.stdout, self.proc.stderr):
                if stream is not None:
                    stream.close()
        if self.init_pidfd is not None:
            os.close(self.init_pidfd)
            self.init_pidfd = None


def supervise(spawn: Spawn) -> Outcome:
    """Run the spawn to completion under its wall clock and output budget; closes both ends of
    the status pipe."""
    run = _Run(spawn)
    t0 = time.monotonic()
    deadline = t0 + spawn.wall_s
    try:
        try:
            run.start()
        except OSError as e:
            run.out.spawn_error = f"cannot start the sandbox: {e}"
            return run.out
        finally:
            os.close(spawn.status_w)  # our copy of the write end: EOF comes when bwrap exits
        run.pump(deadline)
        run.reap(max(deadline, time.monotonic()) + _DRAIN_S)
        return run.out
    finally:
        run.out.wall_s = time.monotonic() - t0
        run.close()
        os.close(spawn.status_r)
