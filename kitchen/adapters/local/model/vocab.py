"""The unembedding (the head) of a frozen base, computed a block of vocabulary rows at a time.

A --nproc N run never holds the vocabulary-sized weight whole (the embedding that the models we run
tie to the head is 21% of SmolLM2-135M): each rank holds its share of every block, and gathers one
block from the ranks for the span of the product that uses it (distributed/sharded_base.py). The
head's backward, dx = dlogits @ W, is a sum over the vocabulary, so it is a sum of one product per
block, added in block order; the blocks (VOCAB_BLOCKS of them) do not depend on N, and one process
computes the same products from slices of its whole weight, so the head's numbers, and the run's,
are the same at any N. The forward's logits are written block by block too: a matrix product
split into blocks of columns can differ in the last bits from the whole (MKL, one row of a decode
step), and sampling must not.
"""

from __future__ import annotations

import functools
from typing import Any, Protocol

# Blocks of rows the vocabulary is split into, whatever the number of ranks: a block of SmolLM2's
# embedding (6144 x 576 in fp32, 13.5 MiB) is the size of one of its decoder layers.
VOCAB_BLOCKS = 8


def vocab_blocks(rows: int) -> list[tuple[int, int]]:
    """The [start, end) rows of each block of a vocabulary of `rows` tokens."""
    size = -(-rows // VOCAB_BLOCKS)
    return [(start, min(start + size, rows)) for start in range(0, rows, size)]


class VocabRows(Protocol):
    """Where a head's weight comes from, one block of rows at a time."""

    blocks: list[tuple[int, int]]
    gathers: bool  # block() is a collective: every rank must call the head as often

    def block(self, k: int, dtype: Any) -> Any:
        """Block k's rows of the weight ([end - start, hidden]) in `dtype`."""
        ...


class WholeRows:
    """One process's head weight: each block a slice of it, or of the copy in the compute dtype
    that the frozen base keeps (host.cast_frozen_linears)."""

    gathers = False

    def __init__(self, weight: Any, compute_weight: Any = None) -> None:
        self.weight = weight
        self.compute_weight = compute_weight
        self.blocks = vocab_blocks(weight.shape[0])

    def block(self, k: int, dtype: Any) -> Any:
        start, end = self.blocks[k]
        for weight in (self.weight, self.compute_weight):
            if weight is not None and weight.dtype == dtype:
                return weight[start:end]
        return self.weight[start:end].to(dtype)


def splits_vocab(model: Any) -> bool:
    """Whether `model`'s head and embedding are ones this module computes by blocks (and a --nproc N
    run shards by rows): a frozen Linear without bias and a frozen plain Embedding. Others (an
    embedding that scales its rows, a 4-bit head, weights that train) keep their own forward."""
    import torch

    head, embed = model.get_output_embeddings(), model.get_input_embeddings()
    return (
        type(head) is torch.nn.Linear
        and head.bias is None
        and type(embed) is torch.nn.Embedding
        and not head.weight.requires_grad
        and not embed.weight.requires_grad
    )


def split_head(head: Any, rows: VocabRows) -> None:
    """`head` (a Linear of `splits_vocab`) computes by the blocks of `rows`, forward and backward.
    peft's LoRA on the head wraps it and calls it as its base layer."""
    head.forward = functools.partial(_head_forward, rows)
    head.vocab_rows = rows


def head_gathers(head: Any) -> bool:
    """Whether `head` (or the Linear that peft's adapter on it wraps) gathers its blocks from the ranks
    at every call (split_head with a --nproc N run's rows)."""
    base = head.get_base_layer() if hasattr(head, "get_base_layer") else head
    rows = getattr(base, "vocab_rows", None)
    return rows is not None and rows.gathers


def _head_forward(rows: VocabRows, x: Any) -> Any:
    return _split_head_function().apply(x, rows)


@functools.cache
def _split_head_function() -> Any:
    import torch

    class SplitHead(torch.autograd.Function):
        """logits = x @ W.T, and dx = dlogits @ W, one block of W's rows at a time."""

        @staticmethod
        def forward(ctx: Any, x: Any, rows: VocabRows) -> Any:
            device = x.device.type
            # Under autocast the head computes as F.linear would: both operands in its dtype.
            autocast = torch.is_autocast_enabled(device)
            dtype = torch.get_autocast_dtype(device) if autocast else x.dtype
            ctx.rows, ctx.x_shape, ctx.x_dtype = rows, x.shape, x.dtype
            vocab = rows.blocks[-1][1]
            with torch.autocast(device, enabled=False):
                x_NH = x.reshape(-1, x.shape[-1]).to(dtype)
                out_NV = torch.empty((x_NH.shape[0], vocab), dtype=dtype, device=x.device)
                for k, (start, end) in enumerate(rows.blocks):
                    weight = rows.block(k, dtype)
                    torch.mm(x_NH, weight.t(), out=out_NV[:, start:end])
                    del weight  # a gathered block is freed before the next one is gathered
            return out_NV.view(*x.shape[:-1], vocab)

        @staticmethod
        def backward(ctx: Any, grad: Any) -> Any:
            rows: VocabRows = ctx.rows
            device = grad.device.type
            with torch.autocast(device, enabled=False):
                grad_NV = grad.reshape(-1, grad.shape[-1])
                dx_NH = torch.zeros(
                    (grad_NV.shape[0], ctx.x_shape[-1]), dtype=torch.float32, device=grad.device
                )
                for k, (start, end) in enumerate(rows.blocks):
                    weight = rows.block(k, grad.dtype)
                    if grad.dtype == torch.float32:
                        dx_NH.addmm_(grad_NV[:, start:end], weight)
                    else:  # each block's product in the compute dtype, their sum in fp32
                        dx_NH += (grad_NV[:, start:end] @ weight).float()
                    del weight
            return dx_NH.to(ctx.x_dtype).view(ctx.x_shape), None

    return SplitHead
