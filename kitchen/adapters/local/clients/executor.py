"""Where the engine's calls run: one process (SoloExecutor), or every rank of a --nproc N run
(distributed/ranked_executor.py's RankedExecutor). The backend picks one when it starts and hands it to
its clients, which call it alike at any N and never ask how many processes there are. The protocol
lives with the clients, who call it, so neither they nor the ranks import the backend's floor."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from collections.abc import Sequence

    import numpy as np

    from kitchen.adapters.local.clients.sampling_client import LocalSamplingClient
    from kitchen.adapters.local.distributed.commands import Command
    from kitchen.adapters.local.model.host import LoraSnapshot, ModelHost
    from kitchen.adapters.local.model.images import Expanded
    from kitchen.adapters.local.sample.compute_thread import ComputeThread
    from kitchen.adapters.local.sample.decode_batch import Spread
    from kitchen.adapters.local.train.deal import Deal


class Executor(Protocol):
    """The processes a call computes in, and what a call does to keep them in step."""

    size: int  # processes (ranks)
    leader: bool  # this process runs the recipe (rank 0)

    def tell(self, command: Command) -> None:
        """Before a call every rank makes: the other ranks start their part of it."""

    def tell_from(self, compute: ComputeThread, command: Command) -> None:
        """`tell`, from outside the compute thread (the calls' one order is the thread's)."""

    def share(self, snapshot: LoraSnapshot, command: Command) -> None:
        """`command` has every rank take its copy of `snapshot`, dropped with rank 0's."""

    def sharded_call(self, model: Any) -> contextlib.AbstractContextManager[None]:
        """The span of one call on `model`'s base, computed by every rank in step."""

    def hold_shared(self, host: ModelHost) -> None:
        """Hold a frozen base that clients share: frozen here, or sharded over the ranks."""

    def hold_trained(self, host: ModelHost) -> None:
        """Hold a base that full fine-tuning trains: as loaded, or sharded over the ranks."""

    def release(self, model: Any) -> None:
        """Forget a fully fine-tuned `model` whose client closed."""

    def deal(self, params: Sequence[Any], full: bool) -> Deal | None:
        """The passes of one training call this process runs and how their gradients add up;
        `full`: full fine-tuning, whose gradients go straight into the sum (None: no deal)."""

    def take_peaks(self) -> dict[str, float]:
        """The other ranks' peak memory since the last take (rank 0's step metrics)."""

    def spread(self, client: LocalSamplingClient) -> Spread | None:
        """The ranks' shares of `client`'s decode batch, when sampling spreads (None: one)."""

    def score(
        self, client: LocalSamplingClient, sequences: list[list[int] | Expanded]
    ) -> list[np.ndarray]:
        """The logprobs of `sequences` under `client`'s weights (compute_logprobs)."""


class SoloExecutor:
    """N = 1: every call computes here, with nothing to tell and nothing to shard."""

    size = 1
    leader = True

    def tell(self, command: Command) -> None:
        pass

    def tell_from(self, compute: ComputeThread, command: Command) -> None:
        pass

    def share(self, snapshot: LoraSnapshot, command: Command) -> None:
        pass

    def sharded_call(self, model: Any) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()

    def hold_shared(self, host: ModelHost) -> None:
        host.freeze()

    def hold_trained(self, host: ModelHost) -> None:
        pass

    def release(self, model: Any) -> None:
        pass

    def deal(self, params: Sequence[Any], full: bool) -> Deal | None:
        from kitchen.adapters.local.train.deal import Deal

        # LoRA's passes' gradients summed apart, as N ranks sum them: the same numbers at any N.
        return None if full else Deal(None, params)

    def take_peaks(self) -> dict[str, float]:
        return {}

    def spread(self, client: LocalSamplingClient) -> Spread | None:
        return None

    def score(
        self, client: LocalSamplingClient, sequences: list[list[int] | Expanded]
    ) -> list[np.ndarray]:
        from kitchen.adapters.local.train.forward import score_sequences

        # A scoring pass does not repay merging a snapshot's weights.
        with client.weights(merge=False) as model:
            scored = score_sequences(model, sequences, client.microbatch_tokens)
        assert scored is not None
        return scored


SOLO: Executor = SoloExecutor()
