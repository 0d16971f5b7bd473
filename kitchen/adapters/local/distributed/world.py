"""One rank's view of a `--nproc N` run: rank 0 runs the recipe, and its compute thread `send`s each
engine call that needs every rank; ranks > 0 `receive` them in that one order (worker.py).

The frozen base is sharded (sharded_base.py): no rank holds it whole between calls, and within a
call each decoder layer, and each block of the vocabulary, is gathered only while it computes, so
every call that computes with the base runs on every rank, in step: training and compute_logprobs
calls deal their passes (deal.py), and each forward of rank 0's decode batch is matched by a
`shadow_forward` on the others.
An adapter's parameters are plain tensors, whole on every rank; each micro-batch's gradient
reaches every rank (Deal), so every rank's Adam takes the same step, and a sampler's adapter
snapshot is taken on every rank alike (`forget` lets ranks > 0 drop theirs once rank 0's is gone).

A rank that stops answering without dying is found by the others: a collective within a call waits
at most the timeout, and every other wait is watched through the ranks' heartbeats (Heartbeats).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import socket
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kitchen.adapters.local.distributed.commands import Command, Forget, Stop
from kitchen.engine.errors import BackendError

if TYPE_CHECKING:
    from kitchen.adapters.local.distributed.sharded_base import ShardedBase
    from kitchen.adapters.local.distributed.sharded_model import ShardedModel

# Set by relaunch.py in every rank's environment: the ranks of one run.
ENV_FLAG = "KITCHEN_NPROC"
# Seconds a collective within a call on the sharded base waits for the other ranks before the run fails.
TIMEOUT_ENV = "KITCHEN_COLLECTIVE_TIMEOUT"
DEFAULT_TIMEOUT_S = 600.0
# The exit code of a rank that gave up on a stopped rank: it has named that rank in its own line.
STALLED_EXIT = 3
# Set by relaunch.py: the file a rank that gave up on a stopped rank writes, so that the launcher adds
# no line of its own (the stopped rank it killed may be the failure the launcher sees first).
STALL_FILE_ENV = "KITCHEN_STALL_FILE"
BEAT_S = 1.0  # seconds between two heartbeats of a rank


class StalledRank(BackendError):
    """A collective waited past the timeout: a rank stopped answering (named when its heartbeat
    stopped too)."""

    exit_code = STALLED_EXIT


class Heartbeats:
    """Every rank's heartbeat: a count in the launcher's store that a thread of the rank adds one
    to every BEAT_S seconds. A stopped process (SIGSTOP, a frozen machine) stops its threads too.
    So a rank whose collective timed out can tell the rank that stopped from one that is only slow
    (`stopped`), and a rank in a wait that has no short limit (`watching`: rank 0 handing on a
    call, which gloo can hold until the others take it; the others waiting for the next call,
    which may come after rank 0 worked alone for long) learns when a rank it waits on stopped."""

    def __init__(
        self, store: Any, rank: int, size: int, limit_s: float, silent: Callable[[int], None]
    ) -> None:
        self.store, self.rank, self.size = store, rank, size
        self.limit_s = limit_s
        self.silent = silent  # called (on the heartbeat thread) with a watched rank gone silent
        self._watched: list[int] = []
        self._ended = threading.Event()
        store.set(f"kitchen/where/{rank}", f"{socket.gethostname()} {os.getpid()}")
        self._thread = threading.Thread(target=self._beat, daemon=True, name="kitchen-heartbeat")
        self._thread.start()

    def end(self) -> None:
        """Stop beating and wait for the thread. A daemon thread still inside the store's C++
        call at interpreter exit is ended there by the finalizer, and that forced unwind through
        a frame that must not throw (the GIL retaken in pybind11's destructor) aborts the process:
        "terminate called without an active exception", exit code -6."""
        self._ended.set()
        self._thread.join(timeout=30)  # the store connection's own timeout

    @contextlib.contextmanager
    def watching(self, ranks: list[int]) -> Iterator[None]:
        self._watched = ranks
        try:
            yield
        finally:
            self._watched = []

    def stopped(self) -> list[int]:
        """The other ranks whose heartbeat stands still over three beats; [] when the store is
        gone (the launcher with it)."""
        others = [r for r in range(self.size) if r != self.rank]
        try:
            before = [self._count(r) for r in others]
            time.sleep(3 * BEAT_S)
            after = [self._count(r) for r in others]
        except Exception:
            return []
        return [r for r, b, a in zip(others, before, after, strict=True) if a == b]

    def local_pid(self, rank: int) -> int | None:
        """`rank`'s process id when it runs on this machine."""
        try:
            host, pid = self.store.get(f"kitchen/where/{rank}").decode().split()
        except Exception:
            return None
        return int(pid) if host == socket.gethostname() else None

    def _count(self, rank: int) -> int:
        return int(self.store.add(f"kitchen/beat/{rank}", 0))

    def _beat(self) -> None:
        seen: dict[int, tuple[int, float]] = {}  # watched rank: (its count, when it last moved)
        try:
            while True:
                self.store.add(f"kitchen/beat/{self.rank}", 1)
                watched, now = self._watched, time.monotonic()
                if not watched:
                    seen.clear()
                for rank in watched:
                    count = self._count(rank)
                    if rank not in seen or seen[rank][0] != count:
                        seen[rank] = (count, now)
                    elif now - seen[rank][1] > self.limit_s:
                        self.silent(rank)
                if self._ended.wait(BEAT_S):
                    return
        except Exception:  # the store is gone: so is the launcher, which ends this rank
            return


@dataclass
class World:
    """This rank's place in the run (`rank` of `size`) and the base models it sharded."""

    rank: int
    size: int
    timeout_s: float = DEFAULT_TIMEOUT_S
    calls: Any = None  # the process group rank 0's calls go by (None: the default group)
    # What left the ranks out of step (a collective failed mid-call), in one line; "" while in step
    failure: str = ""
    beats: Heartbeats | None = None
    device: str = "cpu"  # the device type the ranks compute on
    _peaks: dict[int, float] = field(default_factory=dict)  # rank 0: GiB, by rank > 0 (gather)
    # by id(model): frozen bases, and fully fine-tuned models (sharded_model.py)
    _sharded: dict[int, ShardedBase | ShardedModel] = field(default_factory=dict)
    _forgotten: list[int] = field(default_factory=list)  # snapshot ids rank 0 no longer holds
    _forgotten_lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def leader(self) -> bool:
        return self.rank == 0

    @property
    def broken(self) -> bool:
        """The ranks are out of step: no later call, and no goodbye (a server stops, `failure`)."""
        return bool(self.failure)

    # -- calls from rank 0 -------------------------------------------------------------------------

    def send(self, command: Command) -> None:
        """Rank 0: hand `command` to every other rank; nothing once a collective failed (the
        others are out of step, or gone)."""
        import torch.distributed as dist

        if self.broken:
            return
        with self._forgotten_lock:
            forgotten, self._forgotten = self._forgotten, []
        with self._watching([r for r in range(1, self.size)]):
            if forgotten:
                dist.broadcast_object_list([Forget(tuple(forgotten))], src=0, group=self.calls)
            dist.broadcast_object_list([command], src=0, group=self.calls)

    def share(self, snapshot: Any, command: Command) -> None:
        """Rank 0: `command` has every other rank take its own copy of the sampler `snapshot`
        (a LoraSnapshot), which it drops once rank 0's copy is gone."""
        self.send(command)
        weakref.finalize(snapshot, self._forget, snapshot.snapshot_id)

    def _forget(self, snapshot_id: int) -> None:
        """From any thread (a finalizer): sent with the next call."""
        with self._forgotten_lock:
            self._forgotten.append(snapshot_id)

    def receive(self) -> Command:
        """Ranks > 0: the next command rank 0 sent."""
        import torch.distributed as dist

        box: list[Any] = [None]
        with self._watching([0]):
            dist.broadcast_object_list(box, src=0, group=self.calls)
        command: Command = box[0]
        return command

    def _watching(self, ranks: list[int]) -> contextlib.AbstractContextManager[None]:
        """For a wait on the calls' group, which has no short limit: see `silent`."""
        return contextlib.nullcontext() if self.beats is None else self.beats.watching(ranks)

    def silent(self, rank: int) -> None:
        """From the heartbeat thread: `rank` has shown no heartbeat for the timeout while this
        rank waited on it. Nothing can wake that wait, so this process ends here, in one line."""
        print(
            f"error: rank {self.rank} of {self.size}: rank {rank} stopped answering (no heartbeat "
            f"for more than {self.timeout_s:g} s, {TIMEOUT_ENV})",
            file=sys.stderr,
            flush=True,
        )
        self._give_up([rank])

    def _give_up(self, stopped: list[int]) -> None:
        """The end of this rank, once its line named the `stopped` ranks: it tells the launcher
        and kills those on this machine, then exits. A stopped process cannot take the SIGTERM the
        launcher sends on a failure, and torch.distributed.run waits a fixed 30 s before its
        SIGKILL; a process killed here is one the run has lost anyway."""
        stall_file = os.environ.get(STALL_FILE_ENV)
        if stall_file:
            with open(stall_file, "a") as f:
                f.write(f"{self.rank} {' '.join(map(str, stopped))}\n")
        for rank in stopped:
            pid = None if self.beats is None else self.beats.local_pid(rank)
            if pid is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        os._exit(STALLED_EXIT)

    # -- the sharded base ------------------------------------------------------------------------

    def shard(self, model: Any) -> None:
        """Every rank: shard `model`'s (frozen) weights over the ranks (sharded_base.py)."""
        from kitchen.adapters.local.distributed.sharded_base import ShardedBase

        self._sharded[id(model)] = ShardedBase(model, self.size)

    def shard_trained(self, model: Any) -> None:
        """Every rank: shard a fully fine-tuned `model`, its trained weights too
        (sharded_model.py)."""
        from kitchen.adapters.local.distributed.sharded_model import ShardedModel

        self._sharded[id(model)] = ShardedModel(model, self.size)

    def release(self, model: Any) -> None:
        """Forget a fully fine-tuned `model` whose client closed, so its shards can be freed."""
        self._sharded.pop(id(model), None)

    def holds(self, model: Any) -> bool:
        """Whether `model` is a base sharded over the ranks (a full model a sampler loaded from
        a path is rank 0's alone)."""
        return id(model) in self._sharded

    @contextlib.contextmanager
    def sharded_call(self, model: Any) -> Iterator[None]:
        """Every rank, for the span of one call on `model`'s sharded base. A collective that
        waited past the timeout (a rank stopped answering) fails the call in one line."""
        import torch.distributed as dist

        if self.broken:
            raise BackendError(f"rank {self.rank} of {self.size}: the ranks are out of step")
        sharded = self._sharded[id(model)]
        passes = sharded.passes
        try:
            with sharded.call():
                yield
        except (dist.DistError, RuntimeError) as e:
            # gloo says "Application timeout caused pair closure" or "Timed out waiting 5000ms
            # for send operation to complete" as a plain RuntimeError
            said = str(e).lower()
            if (
                not isinstance(e, dist.DistError)
                and "timeout" not in said
                and "timed out" not in said
            ):
                self._break(e)
                raise
            stalled = StalledRank(self._stall_message())
            self._break(stalled)
            raise stalled from e
        except BackendError as e:
            # Input refused while planning, before any pass: every rank plans from the same data,
            # so each refused it at this point, and rank 0 answers its client; the ranks are in step.
            if sharded.passes != passes:
                self._break(e)
            raise
        except BaseException as e:
            self._break(e)
            raise

    def _break(self, e: BaseException) -> None:
        said = (str(e).strip().splitlines() or [type(e).__name__])[0]
        self.failure = (
            said if said.startswith("rank ") else f"rank {self.rank} of {self.size}: {said}"
        )

    def _stall_message(self) -> str:
        waited = f"a collective waited more than {self.timeout_s:g} s"
        stopped = [] if self.beats is None else self.beats.stopped()
        if not stopped:
            return (
                f"rank {self.rank} of {self.size}: {waited} for the other ranks ({TIMEOUT_ENV}); "
                "one stopped answering, though every rank's heartbeat goes on"
            )
        # the kill waits for the end of this process, once the command has said its line
        atexit.register(self._give_up, stopped)
        named = ", ".join(map(str, stopped))
        return (
            f"rank {self.rank} of {self.size}: rank {named} stopped answering ({waited} for it, "
            f"{TIMEOUT_ENV}; its heartbeat stopped)"
        )

    def shadow_forward(self, model: Any) -> None:
        """Ranks > 0: a filler forward of `model`'s sharded base beside a forward of rank 0's
        decode batch (decode_batch.filler_forward)."""
        import torch

        from kitchen.adapters.local.sample.decode_batch import filler_forward

        with self.sharded_call(model), torch.no_grad():
            filler_forward(model)

    # -- gradients and outputs ---------------------------------------------------------------------

    def gather(self, mine: Any) -> list[Any] | None:
        """Every rank's `mine` on rank 0, in rank order (None on the other ranks). A rank > 0 adds
        its accelerator's peak memory since its previous gather (none on a CPU), which rank 0
        keeps for its next optim_step's metrics (`take_peaks`): no collective of its own."""
        import torch.distributed as dist

        from kitchen.adapters.local.train.memory import peak_gib

        peak = None if self.leader else peak_gib(self.device)
        out: list[Any] | None = [None] * self.size if self.leader else None
        dist.gather_object((mine, peak), out, dst=0)
        if out is None:
            return None
        for rank, (_, peak) in enumerate(out):
            if peak is not None:
                self._peaks[rank] = max(peak, self._peaks.get(rank, peak))
        return [theirs for theirs, _ in out]

    def take_peaks(self) -> dict[str, float]:
        """Rank 0: `memory/peak_gib/rankR`, the most memory each rank R > 0 held allocated on its
        accelerator over the results it sent since the previous take; {} on a CPU."""
        peaks, self._peaks = self._peaks, {}
        return {f"memory/peak_gib/rank{rank}": gib for rank, gib in sorted(peaks.items())}


_world: list[World | None] = []


def world() -> World | None:
    """This process's world when launched with --nproc > 1 (None otherwise); the process group
    is joined on first use."""
    if not _world:
        _world.append(_join() if os.environ.get(ENV_FLAG) else None)
    return _world[0]


def _join() -> World:
    import datetime

    import torch
    import torch.distributed as dist

    cuda = torch.cuda.is_available()
    gpu = None
    if cuda:
        gpu = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        torch.cuda.set_device(gpu)
    timeout_s = float(os.environ.get(TIMEOUT_ENV) or DEFAULT_TIMEOUT_S)
    limit = datetime.timedelta(seconds=timeout_s)
    # device_id: NCCL otherwise guesses each rank's GPU from its global rank (and warns so).
    dist.init_process_group("nccl" if cuda else "gloo", timeout=limit, device_id=gpu)
    # Ranks > 0 wait for rank 0's next call as long as rank 0 works alone (an RL step's envs):
    # that wait, on a group of its own, has no short limit, and neither has rank 0's handing on
    # of a call (gloo can hold it until the others take it); the heartbeats watch both. A rank
    # that dies ends the run through torch.distributed.run; one that stops answering, through
    # the others' timeout or its stopped heartbeat.
    calls = dist.new_group(timeout=datetime.timedelta(days=1))
    rank, size = dist.get_rank(), dist.get_world_size()
    here = World(rank, size, timeout_s, calls, device="cuda" if cuda else "cpu")
    here.beats = Heartbeats(_store(), rank, size, timeout_s, here.silent)
    if here.leader:
        atexit.register(_stop, here)
    return here


def _store() -> Any:
    """A connection of this rank's own to the store the launcher keeps (torch.distributed.run
    names it in MASTER_ADDR and MASTER_PORT), for the heartbeats."""
    import datetime

    import torch.distributed as dist

    return dist.TCPStore(
        os.environ["MASTER_ADDR"],
        int(os.environ["MASTER_PORT"]),
        is_master=False,
        timeout=datetime.timedelta(seconds=30),
    )


def _stop(here: World) -> None:
    """Rank 0 at exit: the other ranks stop too."""
    import torch.distributed as dist

    if dist.is_initialized() and not here.broken:
        here.send(Stop())
        leave(here)


def leave(here: World) -> None:
    """Every rank, at its end: leave together (a rank that exits while another still holds its
    connections can abort that one, exit code -6), with no thread of ours left in torch's C++
    code when the interpreter ends (Heartbeats.end)."""
    import torch.distributed as dist

    dist.barrier()
    if here.beats is not None:  # after the barrier: until every rank is there, they watch beats
        here.beats.end()
    dist.destroy_process_group()
