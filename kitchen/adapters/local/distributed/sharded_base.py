"""The frozen base of a --nproc N run, sharded with FSDP2: `fully_shard` on each decoder layer and at
the root (the embedding, the final norm and the head, which are tied in the models we run).

Between calls every rank holds its shards and nothing else. Every call that computes with the base
(a training call, a compute_logprobs batch, each forward of the decode batch) runs on every rank at
once, within `call`: the root is whole for the call (logprobs.py calls the decoder and the head
apart, so the root's own hooks never run), and a decoder layer whole only while it computes: FSDP's
hooks all-gather it before its forward and free it after, and again for its backward. Those
all-gathers are collectives, so every rank must call the decoder the same number of times in each
call (Deal deals the passes of training and scoring calls; ranks > 0 match each forward of the
decode batch with one of their own, world.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


class ShardedBase:
    """One base model sharded over the ranks of the run."""

    def __init__(self, model: Any, size: int) -> None:
        """Every rank: shard `model` (a collective). Trainable parameters (LoRA) are left out of
        FSDP: they stay whole on every rank and Deal sums their gradients."""
        import torch
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard

        device = next(model.parameters()).device
        mesh = init_device_mesh(device.type, (size,))
        trained = {p for p in model.parameters() if p.requires_grad}
        self.layers = [
            fully_shard(layer, mesh=mesh, reshard_after_forward=True, ignored_params=trained)
            for layer in model.get_decoder().layers
        ]
        self.root = fully_shard(
            model, mesh=mesh, reshard_after_forward=False, ignored_params=trained
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
