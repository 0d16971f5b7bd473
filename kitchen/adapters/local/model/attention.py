"""Which attention kernels the engine's passes use, per device.

CPU under bf16 autocast: attention runs on fp32 copies of the bf16 projections, which is faster
than PyTorch's CPU flash attention in bf16 (and more exact), and hands bf16 back. CUDA: flash or
memory-efficient SDPA, never cuDNN's, which builds a graph for every new shape, and the engine's
passes change shape on nearly every call (KITCHEN_CUDNN_ATTENTION=1 gives torch its choice back).
Packed (padding-free) passes run under PACKED, an attention without a mask, so transformers builds
no block-diagonal mask (which rules out flash kernels); each layer attends per row: torch's
variable-length flash kernel on CUDA in 16 bits, else SDPA once per row. docs/adapters.md (the
local engine's measurements) has the numbers behind each choice, with their dates."""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

# The engine's attention: SDPA (in fp32 on a CPU), per row for packed passes. PACKED is the same
# function under a name with no mask function, which a packed pass's forward runs under.
NAME = "kitchen_sdpa"
PACKED = "kitchen_packed"
# The forward kwarg with a packed row's datum lengths on the host (the other layout kwargs are
# transformers' own names, which its flash-attention integrations read as well).
ROW_LENGTHS = "packed_row_lengths"


def use_engine_attention(model: Any) -> bool:
    """Switch `model` (if it uses SDPA) to the engine's attention; returns whether it did."""
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, sdpa_mask

    if getattr(model.config, "_attn_implementation", None) != "sdpa":
        return False
    AttentionInterface.register(NAME, engine_attention)
    AttentionInterface.register(PACKED, engine_attention)
    ALL_MASK_ATTENTION_FUNCTIONS.register(NAME, sdpa_mask)
    model.set_attn_implementation(NAME)
    return True


def packed_kwargs(lengths: Sequence[int], position_ids: Any, cu_seqlens: Any) -> dict[str, Any]:
    """The decoder's kwargs for one packed row of datums of `lengths`: position ids restarting at
    every datum, and the layout: `cu_seqlens` (int32 [N + 1] on the device, 0 then the running
    sums of `lengths`), the longest datum and the lengths themselves."""
    longest = max(lengths)
    return {
        "position_ids": position_ids,
        "cu_seq_lens_q": cu_seqlens,
        "cu_seq_lens_k": cu_seqlens,
        "max_length_q": longest,
        "max_length_k": longest,
        ROW_LENGTHS: tuple(lengths),
    }


@contextmanager
def packed_pass(decoder: Any) -> Iterator[None]:
    """Inside the block, `decoder`'s forward builds no attention mask (its layers read the layout
    from packed_kwargs), where its attention is the engine's and every layer attends in full:
    a sliding-window layer's window lives in the mask, so such models keep transformers' masks."""
    config = decoder.config
    if config._attn_implementation != NAME or not _full_attention_only(config):
        yield
        return
    config._attn_implementation = PACKED
    try:
        yield
    finally:
        config._attn_implementation = NAME


def _full_attention_only(config: Any) -> bool:
    layer_types = getattr(config, "layer_types", None)
    if layer_types is not None:
        return all(t == "full_attention" for t in layer_types)
    return getattr(config, "sliding_window", None) is None


def engine_attention(
    module: Any, query: Any, key: Any, value: Any, attention_mask: Any, **kwargs: Any
) -> tuple[Any, Any]:
    """transformers' attention interface: query [1 or B, heads, T, head dim]; returns [B, T, heads,
    head dim]. A packed row without a mask (PACKED) attends per datum; with one (transformers'
    block-diagonal mask) it is plain SDPA. A checkpointed layer's recompute sees the kwargs of its
    forward, so it takes the same path."""
    import torch

    lengths = kwargs.get(ROW_LENGTHS)
    if lengths is None or attention_mask is not None:
        return _sdpa(module, query, key, value, attention_mask, **kwargs)
    kernel = varlen_kernel(query)
    if kernel is not None:
        out = kernel(query, key, value, kwargs["cu_seq_lens_q"], kwargs["max_length_q"], kwargs)
        if out is not None:
            return out, None
    if len(lengths) == 1:
        return _sdpa(module, query, key, value, None, **kwargs)
    # split, not slicing: a slice's backward fills a zero tensor of the whole row per datum (and
    # per q, k, v, layer); a split's is one cat.
    parts = zip(*(x.split(lengths, dim=2) for x in (query, key, value)), strict=True)
    outs = [_sdpa(module, q, k, v, None, **kwargs)[0] for q, k, v in parts]
    return torch.cat(outs, dim=1), None


def _sdpa(
    module: Any, query: Any, key: Any, value: Any, attention_mask: Any, **kwargs: Any
) -> tuple[Any, Any]:
    """transformers' SDPA; on a CPU in fp32 (see the module's note), a no-op outside autocast."""
    import torch
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    if query.device.type != "cpu":
        return sdpa_attention_forward(module, query, key, value, attention_mask, **kwargs)
    # Autocast would cast the fp32 copies straight back to bf16 (SDPA is on its bf16 list).
    with torch.autocast("cpu", enabled=False):
        out, weights = sdpa_attention_forward(
            module, query.float(), key.float(), value.float(), attention_mask, **kwargs
        )
    return out.to(query.dtype), weights


# (query, key, value, cu_seqlens, longest, attention kwargs) -> [1, T, heads, head dim], or None
# where the kernel cannot take this call (the caller then attends per row).
VarlenCall = Callable[[Any, Any, Any, Any, int, Mapping[str, Any]], Any]


def varlen_kernel(query: Any) -> VarlenCall | None:
    """torch's variable-length flash kernel (torch.nn.attention.varlen, torch >= 2.9) where it
    runs `query`: on CUDA (compute capability 8 or more), in fp16 or bf16 (under autocast, the
    autocast dtype). None elsewhere."""
    import torch

    if not query.is_cuda:
        return None
    dtype = torch.get_autocast_dtype("cuda") if torch.is_autocast_enabled("cuda") else query.dtype
    if dtype not in (torch.float16, torch.bfloat16):
        return None
    if torch.cuda.get_device_capability(query.device) < (8, 0):
        return None
    return _torch_varlen(dtype)


@functools.cache
def _torch_varlen(dtype: Any) -> VarlenCall | None:
    try:
        from torch.nn.attention.varlen import varlen_attn
    except ImportError:
        return None
    return varlen_call(varlen_attn, dtype)


def varlen_call(varlen_attn: Callable[..., Any], dtype: Any) -> VarlenCall:
    """One call shape over the signatures torch's varlen_attn has had: `is_causal` (2.9) or
    `window_size=(-1, 0)` (later) for causal attention; `scale` and `enable_gqa` where it takes them.
    Without `scale`, a model whose scaling is not 1/sqrt(head dim) attends per row; without
    `enable_gqa`, grouped key/value heads are repeated for each query head."""
    params = inspect.signature(varlen_attn).parameters

    def call(
        query: Any, key: Any, value: Any, cu_seqlens: Any, longest: int, kwargs: Mapping[str, Any]
    ) -> Any:
        heads, _, head_dim = query.shape[1:]
        groups = heads // key.shape[1]
        scaling = kwargs.get("scaling")
        options: dict[str, Any] = {}
        if "window_size" in params:
            options["window_size"] = (-1, 0)
        else:
            options["is_causal"] = True
        if "scale" in params:
            options["scale"] = scaling
        elif scaling is not None and not math.isclose(scaling, head_dim**-0.5):
            return None
        # [1, heads, T, head dim] -> [T, heads, head dim], the kernel's packed layout.
        q, k, v = (x[0].transpose(0, 1).to(dtype).contiguous() for x in (query, key, value))
        if groups > 1:
            if "enable_gqa" in params:
                options["enable_gqa"] = True
            else:
                k, v = k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1)
        out = varlen_attn(q, k, v, cu_seqlens, cu_seqlens, longest, longest, **options)
        return out.unsqueeze(0)

    return call


def sdpa_backends(device: str, cudnn: bool) -> list[Any] | None:
    """The SDPA backends the engine's passes may use on `device`, best first (None: torch's own
    choice, which is every backend): on CUDA flash, memory-efficient, then math, unless `cudnn`."""
    if not device.startswith("cuda") or cudnn:
        return None
    from torch.nn.attention import SDPBackend

    return [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]


@contextmanager
def sdpa_restricted(backends: list[Any] | None) -> Iterator[None]:
    """SDPA limited to `backends` inside the block (torch keeps this choice process-wide, so it is
    held only while the engine computes); nothing changes for None."""
    if backends is None:
        yield
        return
    from torch.nn.attention import sdpa_kernel

    with sdpa_kernel(backends):
        yield
