"""The sandbox port: run one untrusted program under limits and report a verdict.

Model-written code is hostile input. Every adapter returns the same `ExecutionResult`, whose
`reason` says why the run ended, so graders and envs never parse adapter-specific output.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from kitchen.engine.errors import BackendError

Reason = Literal[
    "ok",  # exited 0
    "timeout",  # wall-clock or CPU-time limit
    "memory",  # ran out of its address-space limit (MemoryError, bad_alloc, ENOMEM)
    "output_limit",  # wrote more than max_output_bytes to stdout + stderr; killed
    "killed",  # died from a signal the limits do not explain (SIGSEGV, self-kill, ...)
    "runtime_error",  # exited non-zero
    "sandbox_error",  # the sandbox itself failed; the program may not have run
]
REASONS: tuple[Reason, ...] = (
    "ok",
    "timeout",
    "memory",
    "output_limit",
    "killed",
    "runtime_error",
    "sandbox_error",
)


class Limits(BaseModel):
    """Resource limits for one execution. Every limit applies to the whole sandbox unless noted."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    wall_s: float = Field(
        default=10.0, gt=0, description="wall-clock seconds before every process is killed"
    )
    cpu_s: float | None = Field(
        default=None, gt=0, description="CPU seconds per process (RLIMIT_CPU); None means wall_s"
    )
    memory_mb: int = Field(
        default=512, gt=0, description="address space per process in MiB (RLIMIT_AS)"
    )
    max_processes: int = Field(
        default=32,
        gt=0,
        description="processes and threads the program may run at once (RLIMIT_NPROC)",
    )
    max_file_mb: int = Field(
        default=16, gt=0, description="largest file the program may write (RLIMIT_FSIZE)"
    )
    disk_mb: int = Field(
        default=64, gt=0, description="size of the throwaway work dir (a tmpfs), in MiB"
    )
    max_output_bytes: int = Field(
        default=8 * 1024 * 1024, gt=0, description="stdout + stderr bytes before the run is killed"
    )

    @property
    def cpu_limit_s(self) -> float:
        return self.cpu_s if self.cpu_s is not None else self.wall_s


# A time limit on a program means its CPU time: a loaded machine stretches the wall clock, not the
# work, and a correct answer must not earn reward 0 because other jobs share the cores. The wall
# clock stays as a backstop for a program that waits instead of computing (a sleep, a read that
# never returns), far enough out that load alone does not reach it: a program may run at a quarter
# of a core (WALL_MARGIN) and take WALL_SLACK_S more to start its jail and interpreter.
WALL_MARGIN = 4.0
WALL_SLACK_S = 5.0


def wall_backstop_s(cpu_s: float) -> float:
    """The wall-clock limit that goes with a CPU-time limit of `cpu_s` seconds."""
    return WALL_MARGIN * cpu_s + WALL_SLACK_S


def time_limits(cpu_s: float, base: Limits | None = None) -> Limits:
    """`base` (default Limits()) with `cpu_s` seconds of CPU time and the wall-clock backstop."""
    return (base or Limits()).model_copy(update={"cpu_s": cpu_s, "wall_s": wall_backstop_s(cpu_s)})


class ExecutionResult(BaseModel):
    """What happened to one program: exit status, why it ended, output heads and resource use."""

    model_config = ConfigDict(frozen=True)

    exit_code: int | None = Field(
        description="the program's exit status; 128+N when a signal N killed it; None if it never ran"
    )
    reason: Reason
    stdout: str = Field(default="", description="head of stdout (at most max_output_bytes)")
    stderr: str = Field(
        default="", description="head of stderr (a few KiB); sandbox errors land here"
    )
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    wall_s: float = 0.0
    cpu_s: float | None = Field(
        default=None, description="user + system CPU seconds; None if unknown"
    )
    peak_memory_mb: float | None = Field(
        default=None, description="largest resident set; None if unknown"
    )

    @property
    def ok(self) -> bool:
        return self.reason == "ok"


@dataclass(frozen=True)
class RunRequest:
    """run's and run_async's arguments, their defaults filled in, as one value."""

    program: str
    language: str
    stdin: str
    files: dict[str, str] | None
    limits: Limits | None


@runtime_checkable
class SandboxPort(Protocol):
    """Runs one program in isolation. `run_async` lets an RL env grade many rollouts at once;
    adapters bound how many run concurrently (`max_concurrency`). An adapter that subclasses the
    port inherits run and run_async, the signature stated here, and answers each as one
    RunRequest (`run_request`, `run_request_async`)."""

    def run(
        self,
        program: str,
        *,
        language: str = "python",
        stdin: str = "",
        files: dict[str, str] | None = None,
        limits: Limits | None = None,
    ) -> ExecutionResult:
        return self.run_request(RunRequest(program, language, stdin, files, limits))

    async def run_async(
        self,
        program: str,
        *,
        language: str = "python",
        stdin: str = "",
        files: dict[str, str] | None = None,
        limits: Limits | None = None,
    ) -> ExecutionResult:
        return await self.run_request_async(RunRequest(program, language, stdin, files, limits))

    def run_request(self, request: RunRequest) -> ExecutionResult: ...

    async def run_request_async(self, request: RunRequest) -> ExecutionResult: ...


class SandboxError(BackendError):
    """A sandbox was asked for something it cannot do (unknown language, bad file name)."""


class SandboxUnavailable(SandboxError):
    """The sandbox cannot start on this machine (bubblewrap missing, user namespaces disabled)."""


def check_file_name(name: str) -> str:
    """A file for the work dir must be a plain relative path that stays inside it."""
    parts = name.split("/")
    if not name or name.startswith("/") or any(p in ("", ".", "..") for p in parts):
        raise SandboxError(
            f"sandbox file name {name!r} must be a relative path inside the work dir "
            "(no leading '/', no '.' or '..' parts)"
        )
    return name
