"""The executor of a --nproc N run (clients/executor.py has the protocol and N = 1):
rank 0 tells the other ranks each call before running its own part, every call on the base runs
in step on all of them, and the base is held as shards."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from kitchen.adapters.local.distributed.commands import Command, Decode, Score
from kitchen.adapters.local.distributed.world import World
from kitchen.adapters.local.sample.decode_batch import CacheRows, Op
from kitchen.adapters.local.train.deal import Deal

if TYPE_CHECKING:
    from kitchen.adapters.local.model.host import LoraSnapshot, ModelHost
    from kitchen.adapters.local.model.images import Expanded
    from kitchen.adapters.local.sample.compute_thread import ComputeThread


class Sampler(Protocol):
    """What the ranks read of a sampling client (clients/sampling_client.py's is one): the model
    it samples, its weights, and the size of its scoring passes."""

    host: ModelHost
    snapshot: LoraSnapshot | None
    microbatch_tokens: int  # padded tokens per scoring pass

    def weights(self, merge: bool = True) -> Any:
        """The context in which its weights are the model's (ModelHost.use_weights)."""


class RankedExecutor:
    """Every rank of the run computes each call, its share of it (world.py, worker.py)."""

    def __init__(self, world: World) -> None:
        self.world = world
        self.size = world.size
        self.leader = world.leader

    def tell(self, command: Command) -> None:
        if self.leader:
            self.world.send(command)

    def tell_from(self, compute: ComputeThread, command: Command) -> None:
        if self.leader:
            compute.run(lambda: self.world.send(command))

    def share(self, snapshot: LoraSnapshot, command: Command) -> None:
        self.world.share(snapshot, command)

    def sharded_call(self, model: Any) -> contextlib.AbstractContextManager[None]:
        return self.world.sharded_call(model)

    def hold_shared(self, host: ModelHost) -> None:
        # freeze's cast copies would be of the whole base, on every rank
        self.world.shard(host.base)
        host.sharded = True

    def hold_trained(self, host: ModelHost) -> None:
        host.base.requires_grad_(True)  # before FSDP first gathers it
        self.world.shard_trained(host.base)
        host.sharded = True

    def release(self, model: Any) -> None:
        self.world.release(model)

    def deal(self, params: Sequence[Any], full: bool) -> Deal | None:
        # Full fine-tuning's gradients are FSDP's shards, summed by its reduce-scatters.
        return Deal(self.world, params, sharded=full)

    def take_peaks(self) -> dict[str, float]:
        return self.world.take_peaks()

    def spread(self, client: Sampler) -> RankShares:
        return RankShares(client, self.world)

    def score(self, client: Sampler, sequences: list[list[int] | Expanded]) -> list[np.ndarray]:
        host, snapshot = client.host, client.snapshot
        merge = host.merges(snapshot)
        call = Score(
            host.model_name,
            host.quantization,
            snapshot.snapshot_id if snapshot else None,
            merge,
            sequences,
            client.microbatch_tokens,
        )
        scored = score_on_every_rank(
            self.world, host, snapshot, sequences, client.microbatch_tokens, merge, call
        )
        assert scored is not None
        return scored


class RankShares:
    """The decode batch spread over the ranks of a --nproc N run (decode_batch.Spread): each rank
    keeps a share of the rows and their KV cache, and every forward of the batch runs on all of
    them at once, each rank's logits gathered on rank 0, which chooses every token as one process
    does. A row's logits then come from a forward beside other rows than at N = 1, so they can
    differ in their last bits (docs/distributed.md)."""

    def __init__(self, client: Sampler, world: World) -> None:
        self.client, self.world, self.size = client, world, world.size

    def tick(self, own: Callable[[Any], Any], ops: list[list[Op]]) -> list[Any]:
        import torch

        host, world = self.client.host, self.world
        with self.client.weights() as model:  # sent once nothing on rank 0 can fail before it
            self._send(ops, forward=True)
            with world.sharded_call(host.base), torch.inference_mode():
                mine = own(model)
                theirs = world.gather(None)
        assert theirs is not None
        return [mine] + [
            None if x is None else torch.from_numpy(x).to(host.device) for x in theirs[1:]
        ]

    def settle(self, ops: list[list[Op]]) -> None:
        self._send(ops, forward=False)

    def _send(self, ops: list[list[Op]], forward: bool) -> None:
        host, snapshot = self.client.host, self.client.snapshot
        snapshot_id = snapshot.snapshot_id if snapshot else None
        merge = host.merges(snapshot)
        self.world.send(
            Decode(host.model_name, host.quantization, snapshot_id, merge, ops, forward)
        )


def score_on_every_rank(
    world: World,
    host: ModelHost,
    snapshot: LoraSnapshot | None,
    sequences: list[list[int] | Expanded],
    microbatch_tokens: int,
    merge: bool = False,
    call: Command | None = None,
) -> list[np.ndarray] | None:
    """Every rank of a --nproc N run: its deal of a compute_logprobs batch on `host`'s sharded
    base with `snapshot`'s weights (this rank's copy; merged if rank 0's were, `merge`); the
    logprobs on rank 0, None elsewhere. Rank 0 sends the other ranks their `call` once its
    weights are in place."""
    from kitchen.adapters.local.train.forward import score_sequences

    with host.use_weights(snapshot, merge) as model:
        if call is not None:
            world.send(call)
        with world.sharded_call(host.base):
            return score_sequences(model, sequences, microbatch_tokens, share=Deal(world, []))


def decode_on_every_rank(
    world: World,
    host: ModelHost,
    snapshot: LoraSnapshot | None,
    merge: bool,
    rows: CacheRows,
    ops: list[Op],
    forward: bool,
) -> None:
    """Ranks > 0 of a --nproc N run that spreads sampling: `ops` on this rank's share of rank 0's
    decode batch (RankShares), with `snapshot`'s weights (merged if rank 0's were, `merge`); the
    logits of its forward, if any, go to rank 0."""
    import torch

    if not forward:
        rows.run(None, ops)
        return
    with (
        host.use_weights(snapshot, merge) as model,
        world.sharded_call(host.base),
        torch.inference_mode(),
    ):
        logits = rows.run(model, ops)
        world.gather(None if logits is None else logits.cpu().numpy())


def ranked_executor() -> RankedExecutor | None:
    """This process's executor when launched with --nproc > 1 (None: one process, solo)."""
    from kitchen.adapters.local.distributed.world import world

    here = world()
    return None if here is None else RankedExecutor(here)
