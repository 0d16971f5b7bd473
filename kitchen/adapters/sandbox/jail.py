"""The jail the local sandbox builds with bubblewrap: which namespaces, which mounts, which limits.

Pure functions from (interpreter, limits, files) to an argv, so the isolation is written down in one
place and tests can read it. What the program sees:

    /usr/lib, /usr/lib64 (+ /lib*, as the host links them)   read-only: shared libraries, stdlib
    the interpreter binary (and its stdlib if outside /usr/lib) read-only
    /sandbox          a fresh tmpfs of `disk_mb`, its cwd and HOME; the program and files are copied in
    /tmp -> /sandbox/tmp, /dev/shm (small tmpfs), a minimal /dev, its own /proc
    nothing else: no /etc, /home, /root, /work, host /tmp, no other binaries; / and /dev read-only

Namespaces: user, pid, net (loopback only), mount, ipc, uts, cgroup; nested user namespaces off; all
capabilities dropped and no_new_privs set (bwrap does both). When Kitchen runs as root the jail runs
as a fresh unprivileged host uid, so RLIMIT_NPROC counts only this run's processes.

The chain, each link exec'ing (or forking) the next:
    setpriv   parent-death signal; as root, drop to the fresh uid
    time      GNU time, optional: the program's peak resident set
    prlimit   rlimits: address space, CPU seconds, file size, processes, no core dumps
    bwrap     namespaces and mounts; the program runs as the PID namespace's init
    python3 -E -s -B -X utf8 main.py
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
from dataclasses import dataclass

from kitchen.ports.sandbox import Limits, SandboxUnavailable

WORKDIR = "/sandbox"
MAIN_FILE = "main.py"
SHM_MB = 16
# Root-level names a Debian/Ubuntu host links into /usr; the jail mirrors whichever exist.
_ROOT_LIB_LINKS = ("lib", "lib64", "lib32", "libx32")
_SYSTEM_LIB_DIRS = ("/usr/lib", "/usr/lib64", "/usr/lib32", "/usr/libx32")

# Run by the host interpreter (trusted) once, to learn which paths the jail must expose.
_PROBE = r"""
import json, os, sys, sysconfig
dyn = [p for p in sys.path if p.endswith("lib-dynload")]
lib = None
if sysconfig.get_config_var("Py_ENABLE_SHARED"):
    lib = os.path.join(sysconfig.get_config_var("LIBDIR") or "", sysconfig.get_config_var("LDLIBRARY") or "")
print(json.dumps({"executable": os.path.realpath(sys.executable),
                  "stdlib": sysconfig.get_path("stdlib"), "platstdlib": sysconfig.get_path("platstdlib"),
                  "dynload": dyn, "libpython": lib, "version": sys.version.split()[0]}))
"""


@dataclass(frozen=True)
class Interpreter:
    """A Python interpreter on the host and the read-only paths it needs inside the jail."""

    executable: str
    ro_paths: tuple[str, ...]
    version: str


def default_python() -> str:
    """KITCHEN_SANDBOX_PYTHON, else the system python3 (world-readable, unlike a pyenv under /root)."""
    configured = os.environ.get("KITCHEN_SANDBOX_PYTHON")
    if configured:
        return configured
    for candidate in ("/usr/bin/python3", "/usr/local/bin/python3"):
        if os.path.exists(candidate):
            return candidate
    raise SandboxUnavailable(
        "no system python3 for the sandbox at /usr/bin/python3 or /usr/local/bin/python3; "
        "install Debian package python3 or set KITCHEN_SANDBOX_PYTHON"
    )


def probe_interpreter(python: str) -> Interpreter:
    """Ask the interpreter where its stdlib lives; expose only that (and the binary) in the jail."""
    try:
        out = subprocess.run(
            [python, "-E", "-s", "-c", _PROBE],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError) as e:
        raise SandboxUnavailable(f"sandbox interpreter {python} does not run: {e}") from e
    info = json.loads(out)
    wanted = [info["executable"], info["stdlib"], info["platstdlib"], *info["dynload"]]
    if info["libpython"] and os.path.exists(info["libpython"]):
        wanted.append(info["libpython"])
    return Interpreter(info["executable"], _outside_system_libs(wanted), info["version"])


def _outside_system_libs(paths: list[str]) -> tuple[str, ...]:
    """Drop paths the /usr/lib binds already cover, and paths nested in another kept path."""
    real = sorted({os.path.realpath(p) for p in paths if p})
    kept: list[str] = []
    for p in real:
        covered = [*_SYSTEM_LIB_DIRS, *kept]
        if not any(p == d or p.startswith(d + "/") for d in covered):
            kept.append(p)
    return tuple(kept)


def find_bwrap() -> str:
    found = shutil.which("bwrap")
    if found is None:
        raise SandboxUnavailable(
            "bwrap not found: the local sandbox needs bubblewrap (Debian: apt-get install bubblewrap)"
        )
    return found


def find_util_linux(tool: str) -> str:
    """prlimit and setpriv, both from util-linux (an essential package on Debian)."""
    found = shutil.which(tool)
    if found is None:
        raise SandboxUnavailable(f"{tool} not found: install Debian package util-linux")
    return found


def setpriv_args(setpriv: str, uid: int | None) -> list[str]:
    """The first link of the chain. PDEATHSIG: the chain dies with the thread that started it,
    even if the host process is SIGKILLed (bwrap's --die-with-parent carries it down from
    here). `uid`: as root, drop to a fresh unprivileged uid here rather than in Popen, so Popen
    can vfork, which costs nothing even when the host process is many GB."""
    args = [setpriv, "--pdeathsig", "KILL"]
    if uid is not None:
        args += [f"--reuid={uid}", f"--regid={uid}", "--clear-groups"]
    return [*args, "--"]


def find_time() -> str | None:
    """GNU time (Debian package `time`), optional: without it peak memory is reported as None."""
    return shutil.which("time")


# GNU time's report: a line of its own even when the program's stderr lacks a final newline.
TIME_MARKER = b"\nkitchen-sandbox-peak-kib="


def time_args(gnu_time: str) -> list[str]:
    """GNU time forks the rest of the chain and reports its child's peak resident set. We cannot
    read that from our own wait4: a forked child starts from its parent's resident set, so the
    parent's size would floor every reading; `time` is small, so its floor is ~1 MiB.

    It reports on stderr after its child, and so the whole namespace, is gone: the report is the
    last thing on stderr. (A report file would be an fd the jail inherits: bwrap closes only the
    fds it was handed as options.)"""
    return [gnu_time, "-q", "-f", TIME_MARKER.decode() + "%M"]


def split_time_report(
    head: bytes, tail: bytes, truncated: bool
) -> tuple[bytes, bytes, float | None]:
    """Strip GNU time's report from the end of stderr's head and tail; return the peak in MiB."""
    start = tail.rfind(TIME_MARKER)
    value = tail[start + len(TIME_MARKER) :] if start >= 0 else b""
    if not (value.endswith(b"\n") and value[:-1].isdigit()):
        return head, tail, None
    report = tail[start:]
    if not truncated and head.endswith(report):
        head = head[: len(head) - len(report)]
    return head, tail[:start], int(value) / 1024.0


def rlimit_args(prlimit: str, limits: Limits, *, wrappers: int, limit_processes: bool) -> list[str]:
    """prlimit sets the limits on itself, then execs bwrap; the jail inherits them.

    RLIMIT_NPROC counts per host uid, so it also counts the `wrappers` (bwrap's outer process,
    GNU time) that run as the jail's uid; max_processes includes the program itself. Only as
    root, where each run gets a fresh uid: for anyone else the count would include every
    process they already run, so there the PID namespace and the wall clock bound a fork bomb.
    RLIMIT_CPU: soft = hard, because the program runs as PID-namespace init, which ignores
    SIGXCPU; the kernel's SIGKILL at the hard limit always lands."""
    cpu = max(1, math.ceil(limits.cpu_limit_s))
    mib = 1024 * 1024
    args = [
        prlimit,
        f"--as={limits.memory_mb * mib}",
        f"--cpu={cpu}:{cpu}",
        f"--fsize={limits.max_file_mb * mib}",
        "--core=0",
        "--nofile=1024",
    ]
    if limit_processes:
        args.append(f"--nproc={limits.max_processes + wrappers}")
    return [*args, "--"]


def bwrap_args(
    bwrap: str,
    interpreter: Interpreter,
    limits: Limits,
    file_fds: list[tuple[int, str]],
    status_fd: int,
) -> list[str]:
    """The bubblewrap command line; `file_fds` are (fd, relative path) copied into the work dir."""
    mib = 1024 * 1024
    args = [
        bwrap,
        "--unshare-all",  # user, pid, net, ipc, uts, cgroup (+ mount, always)
        "--unshare-user",
        "--disable-userns",  # no nested user namespaces: less kernel surface
        "--die-with-parent",
        # The program is the namespace's init: when it exits the kernel kills everything it left,
        # and the outer bwrap reaps it directly, so its CPU time and peak memory reach wait4().
        # (bwrap's own reaper hands the exit code over an eventfd and is never reaped by it.)
        # As init it ignores signals it sends itself without a handler; SIGKILL from us works.
        "--as-pid-1",
        "--new-session",  # setsid: no TIOCSTI into a host terminal
        "--hostname",
        "sandbox",
        "--json-status-fd",
        str(status_fd),
        "--clearenv",
        "--setenv",
        "PATH",
        "/usr/bin:/bin",
        "--setenv",
        "HOME",
        WORKDIR,
        "--setenv",
        "TMPDIR",
        f"{WORKDIR}/tmp",
        "--setenv",
        "LANG",
        "C.UTF-8",
    ]
    for name in _ROOT_LIB_LINKS:
        host = f"/{name}"
        if os.path.islink(host):
            args += ["--symlink", os.readlink(host), host]
        elif os.path.isdir(host):
            args += ["--ro-bind", host, host]
    for lib_dir in _SYSTEM_LIB_DIRS:
        args += ["--ro-bind-try", lib_dir, lib_dir]
    for path in interpreter.ro_paths:
        args += ["--ro-bind", path, path]
    args += ["--proc", "/proc", "--dev", "/dev"]
    args += ["--size", str(min(SHM_MB, limits.disk_mb) * mib), "--tmpfs", "/dev/shm"]
    args += ["--size", str(limits.disk_mb * mib), "--tmpfs", WORKDIR]
    args += ["--dir", f"{WORKDIR}/tmp", "--symlink", f"{WORKDIR}/tmp", "/tmp"]
    made: set[str] = set()
    for fd, rel in file_fds:
        parents: list[str] = []
        parent = os.path.dirname(rel)
        while parent and parent not in made:
            made.add(parent)
            parents.append(parent)
            parent = os.path.dirname(parent)
        for d in reversed(parents):  # outermost first
            args += ["--dir", f"{WORKDIR}/{d}"]
        args += ["--file", str(fd), f"{WORKDIR}/{rel}"]
    # Last: everything outside the tmpfs mounts becomes read-only (the root tmpfs is unbounded).
    args += ["--chdir", WORKDIR, "--remount-ro", "/dev", "--remount-ro", "/", "--"]
    return args


def python_command(interpreter: Interpreter) -> list[str]:
    """-E -s: ignore PYTHON* variables and user site; the script's dir stays on sys.path so a
    harness can import the solution. -B: no .pyc writes. utf8 mode for stdin/stdout."""
    return [interpreter.executable, "-E", "-s", "-B", "-X", "utf8", MAIN_FILE]
