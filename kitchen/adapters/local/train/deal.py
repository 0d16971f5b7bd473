"""Which micro-batches of a training or scoring call each rank of a --nproc N run computes
(`passes`), and the sum of their gradients on every rank (`own_grads`). The pass reads the ranks
through `Ranks` alone (distributed/world.py's World is one), so this room never imports them."""

from __future__ import annotations

from collections.abc import Hashable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Protocol


class Ranks(Protocol):
    """The processes of a --nproc N run as a deal uses them: this one's index among `size`."""

    rank: int
    size: int

    @property
    def leader(self) -> bool: ...

    def gather(self, mine: Any) -> list[Any] | None: ...


class Deal:
    """One call's share of the work on this rank: which micro-batches it runs, and the sum of the
    gradients they leave in `params` (the client's adapter tensors; none for a scoring call).

    Each pass's gradient is summed apart, then added in plan order on every rank, so the sum is
    bit-identical at any N (docs/adapters.md says why autograd's order or an all-reduce would not
    be). `sharded`: full fine-tuning at N > 1, whose gradients FSDP's reduce-scatters sum; a filler
    pass then backpropagates zeros."""

    def __init__(self, ranks: Ranks | None, params: Sequence[Any], sharded: bool = False) -> None:
        self.ranks = ranks
        self.params = params
        self.sharded = sharded
        self._kept: list[list[bool]] = []  # per rank, per round: whether its pass is kept
        self._round = 0

    @property
    def distributed(self) -> bool:
        return self.ranks is not None

    @property
    def leader(self) -> bool:
        return self.ranks is None or self.ranks.leader

    def passes(self, kinds: Sequence[Hashable]) -> list[tuple[int, bool]]:
        """The passes this rank runs, in order, as (micro-batch index, kept): `kinds[i]` is
        micro-batch i's sequence of decoder calls (each all-gathers the layers, sharded_base.py),
        so the k-th passes of all ranks must be of one kind. Each kind's micro-batches, in plan
        order (longest first: an even deal in tokens), are dealt round by round, one to each rank;
        where a kind runs out before the last rank, the others run its last (smallest) micro-batch
        again and drop it (kept False)."""
        size = 1 if self.ranks is None else self.ranks.size
        by_kind: dict[Hashable, list[int]] = {}
        for index, kind in enumerate(kinds):
            by_kind.setdefault(kind, []).append(index)
        every: list[list[tuple[int, bool]]] = [[] for _ in range(size)]
        for indices in by_kind.values():
            for first in range(0, len(indices), size):
                for rank in range(size):
                    slot = first + rank
                    kept = slot < len(indices)
                    every[rank].append((indices[slot] if kept else indices[-1], kept))
        self._kept = [[kept for _, kept in mine] for mine in every]
        self._round = 0
        return every[0 if self.ranks is None else self.ranks.rank]

    def gather(self, mine: Any) -> list[Any] | None:
        return [mine] if self.ranks is None else self.ranks.gather(mine)

    @contextmanager
    def own_grads(self, kept: bool = True) -> Iterator[None]:
        """The backward of this rank's next pass (of `passes`) leaves its gradient apart; then the
        round's gradients are added to the accumulated ones (this one dropped unless `kept`)."""
        if self.sharded:  # FSDP's reduce-scatters sum them
            yield
            return
        saved = [p.grad for p in self.params]
        for p in self.params:
            p.grad = None
        try:
            yield
        finally:
            mine = [p.grad for p in self.params]
            for p, grad in zip(self.params, saved, strict=True):
                p.grad = grad
            if self.ranks is None:
                if kept:
                    self._add(mine)
            else:
                self._add_round(mine)

    def _add_round(self, mine: list[Any]) -> None:
        """Every rank: the kept gradients of this round's passes, added in rank order."""
        import torch
        import torch.distributed as dist

        assert self.ranks is not None
        round_, self._round = self._round, self._round + 1
        for rank, kept in enumerate(self._kept):
            if not kept[round_]:
                continue
            if rank == self.ranks.rank:
                parts = [
                    torch.zeros_like(p) if g is None else g
                    for p, g in zip(self.params, mine, strict=True)
                ]
                flat = torch.cat([part.reshape(-1) for part in parts])
            else:
                flat = torch.empty(
                    sum(p.numel() for p in self.params), device=self.params[0].device
                )
            dist.broadcast(flat, src=rank)
            # A part the pass did not reach arrives as zeros: adding it changes nothing.
            views = torch.split(flat, [p.numel() for p in self.params])
            self._add([view.view_as(p).clone() for view, p in zip(views, self.params, strict=True)])

    def _add(self, grads: list[Any]) -> None:
        for p, grad in zip(self.params, grads, strict=True):
            if grad is None:
                continue
            if p.grad is None:
                p.grad = grad
            else:
                p.grad += grad
