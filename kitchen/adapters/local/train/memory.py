"""What a training pass holds in memory, and the levers that make a long sequence fit.

Activation checkpointing: with it on, each decoder layer keeps only its input for backward and runs
its forward again when backward reaches it (torch.utils.checkpoint, non-reentrant, so a frozen
base needs no input that requires grad). A pass then holds one hidden state per layer and token
plus one layer's activations, instead of every layer's: on SmolLM2-135M with one row of 4096 tokens
(fp32, LoRA) peak memory grew by 1.1 GB instead of 5.5 GB, for one more decoder forward per pass
(docs/memory.md).

`auto` turns it on for a request only when its largest micro-batch would not fit in the memory
free on the device without it; a micro-batch that does not fit even with it is refused before any
work starts, with its length, the budget and what would make it fit.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from kitchen.adapters.local.train.logprobs import LOGIT_CHUNK_TOKENS
from kitchen.engine.errors import BackendError

log = logging.getLogger(__name__)

# Bytes a training pass keeps per token and decoder layer for backward, in units of the model's
# widths: fp32 for the residual stream (the weights are fp32 masters, so under autocast the
# embeddings and every residual add stay fp32, and RMSNorm computes in fp32), the compute dtype
# for the rest. Fitted on two measurements (bench/memory.py): SmolLM2-135M, LoRA, fp32, CPU (one
# row of 4096 tokens: peak RSS +5.49 GB, estimated 5.73) and a 1.07B Llama, LoRA, bf16 on an H200
# (one row of 16k: 28.95 GB, estimated 29.2; docs/memory.md).
_PER_LAYER_FP32_HIDDEN = 3.0  # the layer's input, the residual after attention, a norm's fp32 copy
_PER_LAYER_HIDDEN = 4.0  # the normed inputs cast for the projections and LoRA, attention output
_PER_LAYER_INTERMEDIATE = 4.0  # gate, up, act(gate), act(gate) * up
_PER_LAYER_QKV = 2.0  # q, k, v after rotary embedding, kept by SDPA's backward
# Checkpointed, a pass keeps every layer's input (the fp32 residual stream) and, in backward, one
# layer's activations while it runs again, plus the gradients of its MLP's intermediate tensors:
# without that last term the estimate said 2.62 GB where the H200 measured 4.64 at 16k tokens.
_CHECKPOINTED_PER_LAYER_FP32_HIDDEN = 1.0
_CHECKPOINTED_BACKWARD_INTERMEDIATE = 3.0
# The head's fixed part: one chunk's fp32 logits and their gradient (logprobs.py), whatever the
# sequence's length.
_HEAD_CHUNK_COPIES = 2
# Only this share of the memory free when a request starts is planned for activations: the
# optimizer's moments, gradients, the vocabulary chunk's logits and the allocator's slack need the
# rest.
USABLE_SHARE = 0.6


@dataclass
class PaddingTally:
    """Real tokens and decoder positions of the training passes since the last `take`: what
    `train/padding_fraction` reports (the share of positions that were padding)."""

    real: int = 0
    positions: int = 0

    def add(self, batches: Sequence[Any]) -> None:
        self.real += sum(sum(mb.lengths) for mb in batches)
        self.positions += sum(int(mb.host_tokens.size) for mb in batches)

    def take(self) -> dict[str, float]:
        out = {"train/padding_fraction": 1.0 - self.real / self.positions} if self.positions else {}
        self.real = self.positions = 0
        return out


def layer_widths(config: Any) -> tuple[int, int, int, int]:
    """(layers, hidden size, MLP width, q + k + v width) of a decoder config."""
    config = getattr(config, "get_text_config", lambda: config)()
    hidden = int(config.hidden_size)
    heads = int(getattr(config, "num_attention_heads", 1) or 1)
    head_dim = int(getattr(config, "head_dim", None) or hidden // heads)
    kv_heads = int(getattr(config, "num_key_value_heads", None) or heads)
    intermediate = int(getattr(config, "intermediate_size", None) or 4 * hidden)
    return int(config.num_hidden_layers), hidden, intermediate, (heads + 2 * kv_heads) * head_dim


def activation_bytes(config: Any, tokens: int, dtype_bytes: int, checkpointed: bool) -> int:
    """Estimated bytes a pass with gradients over `tokens` tokens holds at its peak beyond what was
    allocated before it: the decoder's activations kept for backward, and the head's one chunk of
    logits (the head runs in chunks of fixed size, logprobs.py, so it does not grow with the
    sequence). `dtype_bytes`: the compute dtype's size (2 under bf16 autocast)."""
    layers, hidden, intermediate, qkv = layer_widths(config)
    per_layer = _PER_LAYER_FP32_HIDDEN * hidden * 4 + dtype_bytes * (
        _PER_LAYER_HIDDEN * hidden + _PER_LAYER_INTERMEDIATE * intermediate + _PER_LAYER_QKV * qkv
    )
    if checkpointed:
        per_token = (
            layers * _CHECKPOINTED_PER_LAYER_FP32_HIDDEN * hidden * 4
            + per_layer
            + _CHECKPOINTED_BACKWARD_INTERMEDIATE * intermediate * dtype_bytes
        )
    else:
        per_token = layers * per_layer
    vocab = int(getattr(config.get_text_config(), "vocab_size", 0) or 0)
    head = _HEAD_CHUNK_COPIES * min(tokens, LOGIT_CHUNK_TOKENS) * vocab * 4
    return int(per_token * tokens + head)


def peak_gib(device: Any) -> float | None:
    """The most memory torch held allocated on the accelerator `device` since the previous
    reading, in GiB; the peak then starts again from what is allocated now. None on a CPU, where
    torch keeps no such count. Reading the allocator's counters does not wait for the device."""
    import torch

    device = torch.device(device)
    if device.type != "cuda":
        return None
    peak = torch.cuda.max_memory_allocated(device) / 2**30
    torch.cuda.reset_peak_memory_stats(device)
    return peak


def free_memory(device: Any) -> int:
    """Bytes free for new tensors on `device`: the CUDA allocator's free memory plus what torch
    holds cached, or the host's MemAvailable."""
    import torch

    device = torch.device(device)
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return int(free + torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device))
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    import os

    return int(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))


def choose_checkpointing(
    config: Any,
    setting: str,
    pass_tokens: Sequence[tuple[int, int]],
    dtype_bytes: int,
    budget: int,
) -> bool:
    """Whether passes of `pass_tokens` (datum index, tokens through the decoder in its micro-batch)
    run with activation checkpointing under `setting`, given `budget` bytes for activations.
    Refuses, naming the longest pass, what it needs and the option that would make it fit, when
    the setting cannot fit it."""
    if not pass_tokens:
        return setting == "on"
    index, tokens = max(pass_tokens, key=lambda p: p[1])
    plain = activation_bytes(config, tokens, dtype_bytes, checkpointed=False)
    saved = activation_bytes(config, tokens, dtype_bytes, checkpointed=True)
    if setting == "off" and plain > budget:
        hint = (
            "--activation-checkpointing auto or on would make it fit"
            if saved <= budget
            else "a shorter --max-length would make it fit"
        )
        raise BackendError(_refusal(index, tokens, plain, budget, "without checkpointing", hint))
    use = setting == "on" or (setting == "auto" and plain > budget)
    if use and setting == "auto":
        log.info(
            "activation checkpointing on for a pass of %d tokens: ~%.1f GiB of activations "
            "without it, over the %.1f GiB budget",
            tokens,
            plain / 2**30,
            budget / 2**30,
        )
    if use and saved > budget:
        fit = max(1, tokens * budget // max(saved, 1))
        raise BackendError(
            _refusal(
                index,
                tokens,
                saved,
                budget,
                "with activation checkpointing",
                f"a --max-length of at most ~{fit} tokens, or a device with more memory, would make it fit",
            )
        )
    return use


class ActivationBudget:
    """Bytes a training client's passes may plan for activations: `USABLE_SHARE` of the memory
    free on its device when its first training pass asks, then kept, so later requests plan by
    arithmetic alone instead of reading /proc/meminfo or the CUDA allocator each time. Memory
    that other work takes after that first read is not seen; the share left over covers it."""

    def __init__(self, device: Any) -> None:
        self.device = device
        self._bytes: int | None = None

    def bytes(self) -> int:
        if self._bytes is None:
            self._bytes = int(USABLE_SHARE * free_memory(self.device))
        return self._bytes


def plan_checkpointing(
    model: Any, batches: Sequence[Any], setting: str, budget: ActivationBudget | None = None
) -> bool:
    """`choose_checkpointing` for training passes over the micro-batches `batches` of `model`,
    inside the host's autocast, against `budget` (default: the memory free on its device now)."""
    import torch

    device = next(model.parameters()).device
    if torch.is_autocast_enabled(device.type):
        dtype_bytes = torch.get_autocast_dtype(device.type).itemsize
    else:
        dtype_bytes = next(model.parameters()).dtype.itemsize
    passes = [
        (mb.indices[max(range(len(mb.lengths)), key=mb.lengths.__getitem__)], mb.host_tokens.size)
        for mb in batches
    ]
    budget = budget or ActivationBudget(device)
    return choose_checkpointing(model.config, setting, passes, dtype_bytes, budget.bytes())


def _refusal(index: int, tokens: int, need: int, budget: int, how: str, hint: str) -> str:
    return (
        f"datum {index}: a pass of {tokens} tokens needs ~{need / 2**30:.1f} GiB of activations "
        f"{how}; the budget is {budget / 2**30:.1f} GiB ({USABLE_SHARE:.0%} of the memory free); {hint}"
    )


def decoder_layers(model: Any) -> list[Any]:
    """The decoder layers of a causal LM (peft-wrapped or not), in order."""
    causal_lm = model.get_base_model() if hasattr(model, "get_base_model") else model
    decoder = causal_lm.get_decoder() if hasattr(causal_lm, "get_decoder") else None
    layers = getattr(decoder, "layers", None)
    if layers is None:
        raise BackendError(
            f"activation checkpointing needs a decoder with a list of layers; "
            f"{type(causal_lm).__name__} has none"
        )
    return list(layers)


@contextmanager
def activation_checkpointing(model: Any, on: bool) -> Iterator[None]:
    """Inside the block, `model`'s decoder layers recompute their activations in backward instead
    of keeping them (when `on`; nothing changes otherwise). Passes without grad run as before."""
    if not on:
        yield
        return
    layers = decoder_layers(model)
    saved = [layer.__dict__.get("forward") for layer in layers]
    for layer in layers:
        layer.forward = functools.partial(_checkpointed, layer.forward)
    try:
        yield
    finally:
        for layer, forward in zip(layers, saved, strict=True):
            if forward is None:
                del layer.forward
            else:
                layer.forward = forward


def _checkpointed(forward: Any, *args: Any, **kwargs: Any) -> Any:
    import torch
    from torch.utils.checkpoint import checkpoint

    if not torch.is_grad_enabled():
        return forward(*args, **kwargs)
    cache = kwargs.get("cache")
    if cache is not None:
        # The shared-prefix passes (logprobs._decode) write keys and values to a cache; the
        # recompute must see the cache as the forward did, and must not write it again.
        kwargs["cache"] = _ReplayCache(cache)
    return checkpoint(functools.partial(forward, **kwargs), *args, use_reentrant=False)


class _ReplayCache:
    """A KV cache seen by one checkpointed layer: its first update writes through to `cache`; a
    recompute's update returns what the cache held before that first one, extended by the
    recomputed keys and values (so gradients reach the recomputed projections), writing nothing.
    Only plain concatenating layers (DynamicLayer) are replayed this way."""

    def __init__(self, cache: Any) -> None:
        self._cache = cache
        self._before: dict[int, tuple[Any, Any] | None] = {}

    def update(self, keys: Any, values: Any, layer_idx: int, *args: Any, **kwargs: Any) -> Any:
        import torch
        from transformers.cache_utils import DynamicLayer

        if layer_idx not in self._before:
            layers = self._cache.layers
            layer: Any = layers[layer_idx] if layer_idx < len(layers) else None
            if layer is not None and layer.is_initialized and layer.get_seq_length() > 0:
                self._before[layer_idx] = (layer.keys, layer.values)
            else:
                self._before[layer_idx] = None
            out = self._cache.update(keys, values, layer_idx, *args, **kwargs)
            if type(self._cache.layers[layer_idx]) is not DynamicLayer:
                raise BackendError(
                    f"activation checkpointing cannot replay a {type(self._cache.layers[layer_idx]).__name__} "
                    "cache (sliding-window or quantized); use --activation-checkpointing off"
                )
            return out
        before = self._before[layer_idx]
        if before is None:
            return keys, values
        return torch.cat([before[0], keys], dim=-2), torch.cat([before[1], values], dim=-2)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cache, name)
