"""A fully fine-tuned model (no adapter: `lora` None) of a --nproc N run, sharded with FSDP2 as it
normally runs: `fully_shard` on each decoder layer and at the root (the embedding, final norm and
head), every trained weight a shard (a DTensor) on each rank, its gradient and AdamW state too.

Within a call the model is gathered as the frozen base is (sharded_base.py): the root whole for the
call, a layer whole only while it computes. Gradients are FSDP's: each layer's backward
reduce-scatters its gradient (a plain sum, as Tinker's losses are) into every rank's shard; the
root's is reduced when the decoder's backward ends (FSDP's final callback: the head runs apart from
the root's forward, logprobs.py). Every rank's k-th pass is one reduce-scatter, so a filler pass
(deal.py) must backpropagate zeros (`Deal.sharded`).

State: `whole_weights` gathers the weights on rank 0 (the folder one process writes, a sampler's
snapshot); `save_sharded` and `load_sharded` write and read the shards of the weights and the
optimizer with torch.distributed.checkpoint, which reshards on load (any N, one process included).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


class ShardedModel:
    """One trained model sharded over the ranks of the run."""

    def __init__(self, model: Any, size: int) -> None:
        """Every rank: shard `model`, whose trained weights already require grad (FSDP's whole
        copy of a weight takes requires_grad from its shard when first gathered)."""
        import torch
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard

        device = next(model.parameters()).device
        mesh = init_device_mesh(device.type, (size,))
        layers = [
            fully_shard(layer, mesh=mesh, reshard_after_forward=True)
            for layer in model.get_decoder().layers
        ]
        self.root = fully_shard(model, mesh=mesh, reshard_after_forward=False)
        for module in [*layers, self.root]:
            # Tinker's losses are sums: FSDP's reduction must be a plain one (gloo has no
            # PREMUL_SUM), and a weight a pass did not reach adds zeros on every rank, so the
            # ranks' reduce-scatters stay the same size.
            module.set_gradient_divide_factor(1.0)
            module.set_force_sum_reduction_for_comms(True)
            module.set_reduce_scatter_unused_params(True, recurse=False)
        self.root.set_reshard_after_backward(False, recurse=False)
        self.passes = 0  # decoder passes begun, as ShardedBase counts them (World.sharded_call)
        model.get_decoder().layers[0].register_forward_pre_hook(self._count_pass)
        for layer in layers:
            # Under autocast a trained weight's cast is cached for the whole call: a later pass
            # would backpropagate into it through the first pass's cast, after FSDP reduced the
            # layer's gradient (the norm came out 1/sqrt(2) of N=1's), and the casts of every
            # layer would stay. Each layer casts its weights anew.
            layer.register_forward_pre_hook(_clear_autocast_cache)
        with torch.no_grad():  # FSDP's root is the module first run forward
            model(input_ids=torch.zeros((1, 1), dtype=torch.long, device=device), use_cache=False)
        self.root.reset_iter_state()

    def _count_pass(self, *_: Any) -> None:
        self.passes += 1

    @contextmanager
    def call(self) -> Iterator[None]:
        """Every rank, for one call: the root whole, the layers gathered as they compute."""
        self.root.unshard()
        try:
            yield
        finally:
            self.root.reset_iter_state()


def _clear_autocast_cache(*_: Any) -> None:
    import torch

    torch.clear_autocast_cache()


def tied_twins(model: Any) -> dict[str, str]:
    """Each name of a weight shared with another name (a head tied to the embedding), mapped to
    the name a safetensors file keeps (the first in sorted order, as safetensors' save_model)."""
    names: dict[int, list[str]] = {}
    for name, p in model.named_parameters(remove_duplicate=False):
        names.setdefault(id(p), []).append(name)
    twins = {}
    for group in names.values():
        kept = sorted(group)[0]
        twins.update({name: kept for name in group if name != kept})
    return twins


def whole_weights(model: Any) -> dict[str, Any]:
    """Every rank (a collective): the whole weights, on rank 0's CPU (one weight gathered at a
    time), keyed as `model.state_dict()`; empty on the other ranks."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    options = StateDictOptions(full_state_dict=True, cpu_offload=True)
    return get_model_state_dict(model, options=options)


def set_whole_weights(model: Any, weights: dict[str, Any]) -> None:
    """Every rank: load whole `weights` (each rank holds them all, as read from a file; a tied
    twin may be missing) into its shards."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict

    weights = dict(weights)
    for twin, kept in tied_twins(model).items():
        weights.setdefault(twin, weights[kept])
    set_model_state_dict(model, weights, options=StateDictOptions(full_state_dict=True))


def save_sharded(folder: Path, model: Any, optimizer: Any) -> None:
    """Every rank: its shards of the weights and the optimizer state, to `folder` (a
    torch.distributed.checkpoint folder; rank 0 writes its index)."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict

    weights, optim = get_state_dict(model, optimizer)
    dcp.save({"model": weights, "optim": optim}, checkpoint_id=str(folder))


def load_sharded(folder: Path, model: Any, optimizer: Any | None) -> None:
    """Every rank (or one process): the weights, and the optimizer state unless `optimizer` is
    None, from a `save_sharded` folder written at any N; each rank reads the parts of its shards."""
    import warnings

    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import (
        get_model_state_dict,
        get_state_dict,
        set_model_state_dict,
        set_state_dict,
    )

    if optimizer is None:
        state: dict[str, Any] = {"model": get_model_state_dict(model)}
    else:
        weights, optim = get_state_dict(model, optimizer)
        state = {"model": weights, "optim": optim}
    with warnings.catch_warnings():
        # In one process DCP warns that it assumes one process: it is.
        warnings.simplefilter("ignore", UserWarning)
        dcp.load(state, checkpoint_id=str(folder), no_dist=not dist.is_initialized())
    if optimizer is None:
        set_model_state_dict(model, state["model"])
    else:
        set_state_dict(
            model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optim"]
        )


def set_whole_optimizer(model: Any, optimizer: Any, saved: dict[str, Any]) -> None:
    """Every rank: an optimizer state saved by one process (`optimizer.state_dict()`, keyed by
    the index of each weight in `model.parameters()` order) loaded into this rank's shards."""
    from torch.distributed.checkpoint.state_dict import (
        StateDictOptions,
        set_optimizer_state_dict,
    )

    names = [name for name, _ in model.named_parameters()]
    groups = [{**g, "params": [names[i] for i in g["params"]]} for g in saved["param_groups"]]
    state = {names[int(i)]: s for i, s in saved["state"].items()}
    set_optimizer_state_dict(
        model,
        optimizer,
        {"state": state, "param_groups": groups},
        options=StateDictOptions(full_state_dict=True),
    )
