"""How a Kitchen process shares the machine's cores: the wait policy of torch's OpenMP runtime,
chosen before torch loads (the runtime reads it once, at load). docs/adapters.md, "Sharing a machine".

An idle OpenMP thread spins by default (libgomp: 300,000 turns, a few ms) before it sleeps. Alone on
its cores that is the faster setting; two processes that both spin on shared cores starve each other
(two `kitchen run` on 2 cores: 20-40x slower a step, against 2x when idle threads sleep at once).
So a process that knows it shares waits passively, and one that is alone keeps the default.
"""

from __future__ import annotations

import importlib.abc
import mmap
import os
import sys
import tempfile
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from importlib.machinery import ModuleSpec
from pathlib import Path
from types import ModuleType

# Variables by which the user has already chosen how OpenMP waits; Kitchen then sets nothing.
USER_CHOICE = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")
# What a process maps once it has loaded an OpenMP runtime (GNU, Intel, LLVM), and what a Kitchen
# process maps at import, before torch: a peer still importing torch is seen too.
OPENMP_RUNTIMES = (b"libgomp", b"libiomp", b"libomp")
MARKER_NAME = "kitchen-cores"


@dataclass(frozen=True)
class WaitPolicy:
    value: str | None  # what OMP_WAIT_POLICY is set to; None: leave the environment as it is
    reason: str


def choose_wait_policy(env: Mapping[str, str], peers: Callable[[], list[int] | None]) -> WaitPolicy:
    """The wait policy for a process with this environment; `peers` gives the pids of the other
    processes on the machine that run OpenMP or Kitchen (None: they could not be looked for), and
    is called only when the environment leaves the choice open."""
    chosen = [key for key in USER_CHOICE if env.get(key)]
    if chosen:
        return WaitPolicy(None, f"the user set {', '.join(chosen)}")
    ranks = env.get("LOCAL_WORLD_SIZE", "1")
    if ranks.isdigit() and int(ranks) > 1:  # torch.distributed.run's ranks on this machine
        return WaitPolicy("PASSIVE", f"one of {ranks} ranks on this machine")
    found = peers()
    if found is None:  # the cheap side of being wrong: 1.5x alone, against 5-40x in a pair
        return WaitPolicy("PASSIVE", "other processes could not be looked for")
    if found:
        shown = ", ".join(map(str, found[:3])) + (", ..." if len(found) > 3 else "")
        return WaitPolicy("PASSIVE", f"other OpenMP or Kitchen processes run: pid {shown}")
    return WaitPolicy(None, "alone on the machine: OpenMP's default wait")


def rank_threads(env: Mapping[str, str], cores: int, local_ranks: int) -> str:
    """OMP_NUM_THREADS for each of `local_ranks` ranks on a machine with `cores` cores: the user's
    setting, else an equal split of the cores (each rank would otherwise take them all)."""
    return env.get("OMP_NUM_THREADS") or str(max(1, cores // local_ranks))


def usable_cores() -> int:
    """The cores this process may run on (its affinity mask where the OS has one)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def find_peers(proc: Path = Path("/proc")) -> list[int] | None:
    """This user's other processes that have an OpenMP runtime or Kitchen's marker mapped, leaving
    out this process's ancestors (a launcher, a test or a shell waits on its child rather than
    computing beside it); None where there is no /proc to read (macOS, Windows)."""
    try:
        names = os.listdir(proc)
    except OSError:
        return None
    skip = _ancestors(proc)
    uid = os.getuid()
    found = []
    for name in names:
        if not name.isdigit() or int(name) in skip:
            continue
        try:
            if os.stat(proc / name).st_uid != uid:  # another user's maps cannot be read
                continue
            maps = (proc / name / "maps").read_bytes()
        except OSError:  # gone since the listing, or not ours to read
            continue
        if any(lib in maps for lib in OPENMP_RUNTIMES) or MARKER_NAME.encode() in maps:
            found.append(int(name))
    return sorted(found)


def parent_pid(pid: int, proc: Path = Path("/proc")) -> int:
    """The parent of process `pid`; 0 where it is gone or there is no /proc to read."""
    try:  # the name in () may hold spaces and parentheses; the parent's pid follows the state
        return int((proc / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return 0


def _ancestors(proc: Path) -> set[int]:
    """This process and its parents up to the first process (or the first it cannot read)."""
    pids, pid = set(), os.getpid()
    while pid > 0 and pid not in pids:
        pids.add(pid)
        pid = parent_pid(pid, proc)
    return pids


_marker: list[mmap.mmap] = []  # held for the life of the process: the mapping is the mark


def mark_this_process() -> None:
    """Map a one-byte file named for Kitchen, so a Kitchen process that starts now sees this one
    while it is still importing torch (two started together otherwise each find the other not yet
    running OpenMP, and both spin). Best effort: without the mark only OpenMP is looked for."""
    if _marker:
        return
    path = Path(os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir())
    try:
        fd = os.open(path / f"{MARKER_NAME}-{os.getuid()}", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            if os.fstat(fd).st_size == 0:
                os.write(fd, b"\0")
            _marker.append(mmap.mmap(fd, 1, mmap.MAP_SHARED, mmap.PROT_READ))
        finally:
            os.close(fd)  # the mapping outlives the descriptor
    except (OSError, ValueError, AttributeError):  # a read-only or foreign file; no mmap.MAP_SHARED
        pass


class DecideBeforeTorch(importlib.abc.MetaPathFinder):
    """An import hook that runs `decide` once, as torch is first imported: the last moment libgomp
    can still read the policy, so a Kitchen process that started since this one imported kitchen is
    seen too, and two started together both wait passively. It finds nothing itself."""

    def __init__(self, decide: Callable[[], None]) -> None:
        self._decide: Callable[[], None] | None = decide

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if fullname == "torch" and self._decide is not None:
            decide, self._decide = self._decide, None  # inert from now on, but left in place:
            decide()  # the import machinery is iterating over sys.meta_path right now
        return None


decided: WaitPolicy | None = None  # this process's choice, once torch was imported after kitchen


def share_cores(environ: MutableMapping[str, str]) -> None:
    """Mark this process now, and set OMP_WAIT_POLICY as choose_wait_policy says when torch is
    first imported. Nothing to do once torch has loaded: libgomp read the policy as it loaded."""
    mark_this_process()
    if "torch" in sys.modules:
        return

    def decide() -> None:
        global decided
        decided = choose_wait_policy(environ, find_peers)
        if decided.value is not None:
            environ["OMP_WAIT_POLICY"] = decided.value

    sys.meta_path.insert(0, DecideBeforeTorch(decide))
