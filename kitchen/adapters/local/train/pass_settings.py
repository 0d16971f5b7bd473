"""How one client's training passes run: the settings that travel together from the backend's
settings to every entry point of forward.py, and the call's share of the work at --nproc N."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kitchen.adapters.local.train.deal import Deal
    from kitchen.adapters.local.train.memory import ActivationBudget, PaddingTally


@dataclass(frozen=True)
class PassSettings:
    """`microbatch_tokens`: the tokens through the decoder per micro-batch; `checkpointing`: the
    activation checkpointing auto | on | off, within `budget` (memory.py); `packed`: padding-free
    micro-batches (batching.py); `tally` counts the padding of passes with gradients; `share`:
    this call's deal of the passes at --nproc N (deal.py), None for the whole of them here."""

    microbatch_tokens: int
    checkpointing: str = "off"
    packed: bool = False
    budget: ActivationBudget | None = None
    tally: PaddingTally | None = None
    share: Deal | None = None

    def dealt(self, share: Deal | None) -> PassSettings:
        """These settings for one call with its deal (a Deal is one call's: it counts rounds)."""
        return dataclasses.replace(self, share=share)
