"""Which attention kernels the engine's passes use, per device.

CPU under bf16 autocast: fp32. PyTorch's CPU flash attention is slow in bf16: on SmolLM2 shapes
(11 rows x 9 heads x 45 tokens) forward + backward took 8.1 ms in bf16 against 2.3 ms in fp32, and
casting q, k, v to fp32 around the fp32 kernel took 2.6 ms; at 512 tokens the two are within 5%. So
under CPU autocast the engine runs attention on fp32 copies of the bf16 projections (more exact too)
and hands bf16 back.

CUDA: flash or memory-efficient SDPA, never cuDNN's. Since torch 2.10 with cuDNN > 9.15, SDPA on
Hopper (sm90) and Blackwell (sm100) tries cuDNN's attention first, and cuDNN builds an execution
graph for every new combination of shapes and strides it sees (tens of ms of host time each, forward
and backward separately; cached after). The engine's passes change shape on nearly every call
(micro-batches padded to their longest row, shared-prefix passes, one compute_logprobs per sequence),
so they kept paying for builds: in a DPO run on an H100, 10.4 of ~15 s of the compute thread's
forward work sat inside the SDPA call itself (py-spy, 2026-11-26), against ~1 s in the seven
projections of every layer, in steps of 2.3-10.1 s where TRL's took 0.4. Flash and efficient
kernels take any shape at launch cost. KITCHEN_CUDNN_ATTENTION=1 (or backend extra
cudnn_attention) gives torch its own choice back, for fixed-shape work where cuDNN's faster kernels
would pay.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

NAME = "kitchen_sdpa_fp32"


def sdpa_in_fp32(
    module: Any, query: Any, key: Any, value: Any, attention_mask: Any, **kwargs: Any
) -> tuple[Any, Any]:
    import torch
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    # Autocast would cast the fp32 copies straight back to bf16 (SDPA is on its bf16 list).
    with torch.autocast(query.device.type, enabled=False):
        out, weights = sdpa_attention_forward(
            module, query.float(), key.float(), value.float(), attention_mask, **kwargs
        )
    return out.to(query.dtype), weights


def use_fp32_attention(model: Any) -> bool:
    """Switch `model` (if it uses SDPA) to fp32 attention; returns whether it did."""
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, sdpa_mask

    if getattr(model.config, "_attn_implementation", None) != "sdpa":
        return False
    AttentionInterface.register(NAME, sdpa_in_fp32)
    ALL_MASK_ATTENTION_FUNCTIONS.register(NAME, sdpa_mask)
    model.set_attn_implementation(NAME)
    return True


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
