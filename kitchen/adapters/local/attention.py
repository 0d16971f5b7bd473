"""Attention in fp32 on a CPU under bf16 autocast.

PyTorch's CPU flash attention is slow in bf16: on SmolLM2 shapes (11 rows x 9 heads x 45 tokens)
forward + backward took 8.1 ms in bf16 against 2.3 ms in fp32, and casting q, k, v to fp32 around
the fp32 kernel took 2.6 ms; at 512 tokens the two are within 5%. So under CPU autocast the engine
runs attention on fp32 copies of the bf16 projections (more exact too) and hands bf16 back.
GPUs keep the stock kernel.
"""

from __future__ import annotations

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
