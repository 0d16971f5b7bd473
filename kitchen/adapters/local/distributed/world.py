"""One rank's view of a `--nproc N` run: rank 0 runs the recipe, and its compute thread `send`s each
engine call that needs every rank; ranks > 0 `receive` them in that one order (worker.py).

The frozen base is sharded with FSDP2 (`fully_shard` per decoder layer and at the root). It is
gathered whole for the span of each training call on every rank, then released again on ranks > 0;
rank 0 keeps it whole between calls, so sampling and compute_logprobs run on rank 0 alone, with no
collective, exactly as one process runs them. Within a call no pass runs a collective, so ranks may
run different numbers of micro-batches (no zero-weight fillers are needed) and the decoder may be
called below FSDP's root (logprobs.py calls the decoder and the head apart). LoRA parameters are
plain tensors, whole on every rank; each micro-batch's gradient reaches every rank (Deal), so
every rank's Adam takes the same step.
"""

from __future__ import annotations

import atexit
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

# Set by launch.py in every rank's environment: the ranks of one run.
ENV_FLAG = "KITCHEN_NPROC"


@dataclass
class World:
    """This rank's place in the run (`rank` of `size`) and the base models it sharded."""

    rank: int
    size: int
    _sharded: dict[int, list[Any]] = field(default_factory=dict)  # id(base model) -> FSDP modules

    @property
    def leader(self) -> bool:
        return self.rank == 0

    # -- calls from rank 0 -------------------------------------------------------------------------

    def send(self, *call: Any) -> None:
        """Rank 0: hand `call` (a kind and its arguments, all picklable) to every other rank."""
        import torch.distributed as dist

        dist.broadcast_object_list([call], src=0)

    def receive(self) -> tuple[Any, ...]:
        """Ranks > 0: the next call rank 0 sent."""
        import torch.distributed as dist

        box: list[Any] = [None]
        dist.broadcast_object_list(box, src=0)
        return tuple(box[0])

    # -- the sharded base ------------------------------------------------------------------------

    def shard(self, model: Any) -> None:
        """Shard `model`'s (frozen) weights over the ranks; rank 0 then gathers them back whole."""
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard

        device = next(model.parameters()).device.type
        mesh = init_device_mesh(device, (self.size,))
        modules = []
        for layer in model.get_decoder().layers:
            modules.append(fully_shard(layer, mesh=mesh, reshard_after_forward=False))
        modules.append(fully_shard(model, mesh=mesh, reshard_after_forward=False))
        for module in modules:
            # Gathering and releasing are ours (`gathered`): no pass may start a collective.
            module.set_reshard_after_backward(False)
        self._sharded[id(model)] = modules
        self._unshard(modules)
        self._release(modules)

    @contextmanager
    def gathered(self, model: Any) -> Iterator[None]:
        """Every rank: `model`'s weights whole for the span of one call (a collective)."""
        modules = self._sharded[id(model)]
        for module in modules:
            module.reshard()  # rank 0's are whole already; an all-gather needs every rank's part
        self._unshard(modules)
        try:
            yield
        finally:
            self._release(modules)

    def _unshard(self, modules: Sequence[Any]) -> None:
        for module in modules:
            module.unshard()

    def _release(self, modules: Sequence[Any]) -> None:
        """Ranks > 0 free the whole weights again; rank 0 keeps them for its own passes."""
        if not self.leader:
            for module in modules:
                module.reshard()

    # -- gradients and outputs ---------------------------------------------------------------------

    def deal(self, count: int) -> list[int]:
        """The micro-batches (of `count`, in plan order) this rank runs: every size-th one. The
        plan is sorted longest first, so the deal is about even in tokens."""
        return list(range(self.rank, count, self.size))

    def gather(self, mine: Any) -> list[Any] | None:
        """Every rank's `mine` on rank 0, in rank order (None on the other ranks)."""
        import torch.distributed as dist

        out: list[Any] | None = [None] * self.size if self.leader else None
        dist.gather_object(mine, out, dst=0)
        return out


class Deal:
    """One training call's share of the work on this rank: which micro-batches it runs, and the
    gradient each of them left in `params` (the client's LoRA tensors), kept apart.

    `merge_grads` then adds every micro-batch's gradient, from whichever rank ran it, in plan
    order, on every rank: the same additions in the same order as one process accumulating them
    pass after pass, so the sum is bit-identical to --nproc 1 (an all-reduce would add in another
    order, and Adam turns the last bit of a near-zero gradient into a step of the learning rate)."""

    def __init__(self, world: World, params: Sequence[Any]) -> None:
        self.world = world
        self.params = list(params)
        self._grads: dict[int, list[Any]] = {}

    @property
    def leader(self) -> bool:
        return self.world.leader

    def deal(self, count: int) -> list[int]:
        return self.world.deal(count)

    def gather(self, mine: Any) -> list[Any] | None:
        return self.world.gather(mine)

    @contextmanager
    def own_grads(self, index: int) -> Iterator[None]:
        """Micro-batch `index`'s backward leaves its gradient apart from those accumulated."""
        saved = [p.grad for p in self.params]
        for p in self.params:
            p.grad = None
        try:
            yield
        finally:
            self._grads[index] = [p.grad for p in self.params]
            for p, grad in zip(self.params, saved, strict=True):
                p.grad = grad

    def merge_grads(self, count: int) -> None:
        """Every rank: each micro-batch's gradient added to the accumulated ones, in plan order."""
        import torch.distributed as dist

        parts: list[Any] = [None] * self.world.size
        dist.all_gather_object(parts, self._grads)
        self._grads = {}
        by_index = {i: grads for part in parts for i, grads in part.items()}
        for i in range(count):
            for p, grad in zip(self.params, by_index[i], strict=True):
                if grad is None:
                    continue
                if p.grad is None:
                    p.grad = grad.to(p.device)
                else:
                    p.grad += grad.to(p.device)


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
    if cuda:
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    # Ranks > 0 wait for rank 0's next call as long as rank 0 works alone (an RL step's sampling),
    # so the wait has no short limit; a rank that dies ends the run through torch.distributed.run.
    dist.init_process_group("nccl" if cuda else "gloo", timeout=datetime.timedelta(hours=24))
    here = World(rank=dist.get_rank(), size=dist.get_world_size())
    if here.leader:
        atexit.register(_stop, here)
    return here


def _stop(here: World) -> None:
    """Rank 0 at exit: the other ranks stop too."""
    import torch.distributed as dist

    if dist.is_initialized():
        here.send("stop")
        leave()


def leave() -> None:
    """Every rank, at its end: leave together (a rank that exits while another still holds its
    connections can abort that one, exit code -6)."""
    import torch.distributed as dist

    dist.barrier()
    dist.destroy_process_group()
