"""The frozen base of a --nproc N run, sharded: `fully_shard` (FSDP2) on each decoder layer and at the
root (the final norm), and the vocabulary-sized weight by rows, block by block (`VocabShards`), so
no rank holds it whole between calls.

Within a call (`call`) a decoder layer is whole only while it computes, and a block of the
vocabulary only while it is used. Those gathers are collectives, so every rank calls the decoder and
the head the same number of times in a call: Deal deals training and scoring passes, and ranks > 0
match each decode forward with one of their own. docs/adapters.md has the whole account."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from kitchen.adapters.local.model.vocab import split_head, splits_vocab, vocab_blocks


class ShardedBase:
    """One base model sharded over the ranks of the run."""

    def __init__(self, model: Any, size: int) -> None:
        """Every rank: shard `model` (a collective). Trainable parameters (an adapter's) are left
        out of FSDP: they stay whole on every rank and Deal sums their gradients."""
        import torch
        import torch.distributed as dist
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard

        device = next(model.parameters()).device
        mesh = init_device_mesh(device.type, (size,))
        trained = {p for p in model.parameters() if p.requires_grad}
        self.vocab: list[VocabShards] = []  # the embedding's rows, then the head's if not tied
        if splits_vocab(model):
            embed, head = model.get_input_embeddings(), model.get_output_embeddings()
            rank = dist.get_rank()
            self.vocab.append(VocabShards(embed.weight, rank, size))
            if head.weight is not embed.weight:
                self.vocab.append(VocabShards(head.weight, rank, size))
            # The whole weights go with their last references, the modules' own.
            embed.weight, embed.forward = self.vocab[0].parameter, self.vocab[0].lookup
            head.weight = self.vocab[-1].parameter
            split_head(head, self.vocab[-1])
        outside = trained | {shards.parameter for shards in self.vocab}
        self.layers = [
            fully_shard(layer, mesh=mesh, reshard_after_forward=True, ignored_params=outside)
            for layer in model.get_decoder().layers
        ]
        self.root = fully_shard(
            model, mesh=mesh, reshard_after_forward=False, ignored_params=outside
        )
        for module in [*self.layers, self.root]:
            # A gradient FSDP reduces (none while the base is frozen) is a sum, as Tinker's losses
            # are; gloo has no PREMUL_SUM, so the sum must be a plain one.
            module.set_gradient_divide_factor(1.0)
            module.set_force_sum_reduction_for_comms(True)
        # The root is whole for a whole call, whatever backward does to the layers.
        self.root.set_reshard_after_backward(False, recurse=False)
        # Decoder passes begun (any call): a call refused before its first pass leaves the ranks in
        # step (World.sharded_call).
        self.passes = 0
        model.get_decoder().layers[0].register_forward_pre_hook(self._count_pass)
        # FSDP's root is the module first run forward: the model, not its first layer.
        with torch.no_grad():
            model(input_ids=torch.zeros((1, 1), dtype=torch.long, device=device), use_cache=False)
        self.root.reset_iter_state()  # every module back to its shard

    def _count_pass(self, *_: Any) -> None:
        self.passes += 1

    @contextmanager
    def call(self) -> Iterator[None]:
        """Every rank, for one call: the root whole, the layers gathered one at a time as they
        compute; then every module back to its shard."""
        self.root.unshard()
        try:
            yield
        finally:
            self.root.reset_iter_state()


class VocabShards:
    """A vocabulary-sized weight [V, H] split by rows: each of its blocks (vocab.vocab_blocks, the
    same at any N) is split evenly over the ranks, and this rank keeps its share of every block
    ([blocks, rows, H], the last rows zero where a block does not divide evenly)."""

    gathers = True

    def __init__(self, weight: Any, rank: int, size: int) -> None:
        import torch

        self.blocks = vocab_blocks(weight.shape[0])
        self.size = size
        self.rows = -(-(self.blocks[0][1] - self.blocks[0][0]) // size)  # per rank per block
        local = torch.zeros(
            (len(self.blocks), self.rows, weight.shape[1]), dtype=weight.dtype, device=weight.device
        )
        with torch.no_grad():
            for k, (start, end) in enumerate(self.blocks):
                first = min(start + rank * self.rows, end)
                mine = weight[first : min(first + self.rows, end)]
                local[k, : mine.shape[0]] = mine
        # The module's weight now: this rank's rows, frozen (peft reads its device and dtype).
        self.parameter = torch.nn.Parameter(local.view(-1, weight.shape[1]), requires_grad=False)
        self._local = local

    def block(self, k: int, dtype: Any) -> Any:
        """Block k whole, gathered from every rank (a collective): drop it once used. Gathered
        as stored and cast after: the collective must not depend on the caller's autocast (the
        one-token forward beside rank 0's decode forward runs without it)."""
        import torch

        local = self._local[k]
        gathered = torch.empty(
            (self.size * self.rows, local.shape[1]), dtype=local.dtype, device=local.device
        )
        _all_gather_single()(gathered, local)
        start, end = self.blocks[k]
        return gathered[: end - start].to(dtype)

    def lookup(self, ids: Any) -> Any:
        """The embedding's forward: each token's row, from the block that holds it (every block
        is gathered in turn, whatever the tokens: the ranks gather in step)."""
        import torch
        import torch.nn.functional as F

        out = torch.zeros(
            (*ids.shape, self._local.shape[-1]), dtype=self._local.dtype, device=ids.device
        )
        for k, (start, end) in enumerate(self.blocks):
            weight = self.block(k, self._local.dtype)
            inside = ((ids >= start) & (ids < end)).unsqueeze(-1)
            rows = F.embedding((ids - start).clamp(0, end - start - 1), weight)
            out = torch.where(inside, rows, out)
            del weight, rows
        return out


def _all_gather_single() -> Any:
    """torch's all-gather into one tensor: `all_gather_single` from torch 2.13 (which deprecates
    the older name with a warning), `all_gather_into_tensor` before it (2.11 has no other)."""
    import torch.distributed as dist

    return getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
