"""Why did a run end? One pure function shared by the adapters, so every backend says it alike."""

from __future__ import annotations

import math
import signal

from kitchen.ports.sandbox import Reason

# What a program prints when it hits its address-space limit (Python, C++, C/shell).
_MEMORY_MARKERS = ("MemoryError", "std::bad_alloc", "Cannot allocate memory")
# Writes refused by RLIMIT_FSIZE (Python ignores SIGXFSZ and gets EFBIG) or a full work dir.
_DISK_MARKERS = ("[Errno 27] File too large", "[Errno 28] No space left on device")


def classify(
    *,
    exit_code: int | None,
    started: bool,
    killed_for: str | None,
    stderr_tail: str,
    cpu_s: float | None,
    cpu_limit_s: float,
) -> Reason:
    """Map the facts of a run to its reason. Exit codes above 128 mean death by signal 128-N,
    as bwrap and shells report them."""
    if not started or exit_code is None:
        return "sandbox_error"
    if killed_for == "output":
        return "output_limit"
    if killed_for == "wall":
        return "timeout"
    if exit_code == 0:
        return "ok"
    sig = exit_code - 128 if exit_code > 128 else None
    # Nothing inside the namespace can SIGKILL the program (it is the namespace's init), so a
    # SIGKILL we did not send is the kernel's: the RLIMIT_CPU hard limit (whole seconds, checked
    # on ticks, hence the slack) or, failing that, the OOM killer.
    if sig == signal.SIGXCPU or (
        sig == signal.SIGKILL and cpu_s is not None and cpu_s >= 0.8 * math.ceil(cpu_limit_s)
    ):
        return "timeout"
    if any(m in stderr_tail for m in _MEMORY_MARKERS):
        return "memory"
    if sig == signal.SIGXFSZ or any(m in stderr_tail for m in _DISK_MARKERS):
        return "output_limit"
    if sig is not None:
        return "killed"
    if exit_code == 1 and stderr_tail.startswith("bwrap: "):
        return "sandbox_error"  # bwrap could not exec the program (missing interpreter, ...)
    return "runtime_error"
