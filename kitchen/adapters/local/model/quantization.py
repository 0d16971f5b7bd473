"""A 4-bit base under LoRA (QLoRA): the shared base model's Linear layers held as NF4 blocks
(bitsandbytes), dequantized block by block in each matmul; LoRA adapters, norms, embeddings and the
unembedding stay fp32 and train as usual.

NF4 holds a weight in about 4.5 bits instead of 32, so the base's decoder Linears take about 1/7 of
their fp32 memory; the price is the dequantization in every pass and weights rounded to 16 levels
per block (docs/memory.md). Everything that runs on the base (training, sampling, compute_logprobs,
reference logprobs) runs on the same quantized weights, and export merges an adapter into those
weights dequantized, so the merged model is the one that was trained.
"""

from __future__ import annotations

import sys
from typing import Any

from kitchen.engine.errors import ConfigError

QUANTIZATIONS = ("none", "nf4")


def hold_back_bitsandbytes() -> None:
    """Mark bitsandbytes absent from this process until a 4-bit base is asked for. peft imports it
    wherever it is installed, and its import compiles its kernels' wrappers and prints a warning
    about a missing optional package; a run on a full-precision base needs none of it. Marked
    absent, peft and transformers see it as not installed. Nothing to do once it is imported."""
    global _held_back
    if "bitsandbytes" not in sys.modules:
        sys.modules["bitsandbytes"] = None  # type: ignore[assignment]
        _held_back = True


def allow_bitsandbytes() -> None:
    """Undo `hold_back_bitsandbytes` for a 4-bit base: its mark goes (not one set by anyone else),
    and so do the answers peft and transformers cached while it stood."""
    global _held_back
    if not _held_back:
        return
    _held_back = False
    if "bitsandbytes" in sys.modules and sys.modules["bitsandbytes"] is None:
        del sys.modules["bitsandbytes"]
    for module, check in (
        ("peft.import_utils", "is_bnb_4bit_available"),
        ("transformers.utils.import_utils", "is_bitsandbytes_available"),
    ):
        cached = getattr(sys.modules.get(module), check, None)
        if cached is not None and hasattr(cached, "cache_clear"):
            cached.cache_clear()


_held_back = False  # whether the mark in sys.modules is hold_back_bitsandbytes's


def quantization_config(quantization: str, device: str, compute_dtype: Any = None) -> Any:
    """transformers' load-time quantization for `quantization` on `device` (None for "none"), after
    checking that bitsandbytes is installed and runs a 4-bit layer there; one line otherwise.
    `compute_dtype`: what the layers' matmuls take (the engine's autocast dtype; None: fp32)."""
    if quantization == "none":
        return None
    import torch
    from transformers import BitsAndBytesConfig

    check_device(device)
    return BitsAndBytesConfig(
        load_in_4bit=True,
        bnb_4bit_quant_type="nf4",
        bnb_4bit_compute_dtype=compute_dtype or torch.float32,
    )


def check_device(device: str) -> None:
    """Raise one line unless bitsandbytes is installed and computes an NF4 layer on `device`,
    forward and backward (its device list alone says nothing of the build installed)."""
    try:
        import bitsandbytes as bnb
    except ImportError:
        raise ConfigError(
            "--base-quantization nf4 needs bitsandbytes, which is not installed: "
            "pip install 'kitchen[qlora]'"
        ) from None
    import torch

    version = getattr(bnb, "__version__", "")
    try:
        layer = bnb.nn.Linear4bit(64, 64, bias=False, quant_type="nf4").to(device)
        x = torch.ones(2, 64, device=device, requires_grad=True)
        layer(x).sum().backward()
    except Exception as e:
        reason = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise ConfigError(
            f"--base-quantization nf4: bitsandbytes {version} cannot run 4-bit layers on {device!r} "
            f"({reason}); use --base-quantization none"
        ) from None


def prepare_quantized(model: Any) -> int:
    """Make every 4-bit layer of `model` run as a full-precision Linear of the engine does; returns
    how many.

    - Under autocast a layer takes and returns the autocast dtype, as F.linear does there. A
      bitsandbytes layer returns its input's dtype, which is fp32 (the residual stream and norms
      are fp32), so every tensor after it was fp32: on an H200 (1.07B Llama, LoRA, bf16, rows of
      4096-1024 tokens) a step's peak was 20.65 GB against the full-precision base's 14.37, the
      MLP's kept activations taking twice the bytes (docs/memory.md).
    - One kernel that has a backward: on a CPU with AVX512-BF16, bitsandbytes repacks a layer's
      weights for a faster inference kernel the first time it runs without grad (a sampling pass),
      and from then on runs that kernel for every call, also with grad, where it returns no
      gradient for its input: LoRA layers below it would then get none."""
    import functools

    import bitsandbytes as bnb

    count = 0
    for module in model.modules():
        if isinstance(module, bnb.nn.Linear4bit):
            module.support_avx512bf16_for_cpu = False
            # An instance attribute, so peft's LoRA wrapper (which calls base_layer(x)) takes it.
            module.forward = functools.partial(_autocast_4bit, module)  # type: ignore[method-assign]
            count += 1
    return count


def _autocast_4bit(layer: Any, x: Any) -> Any:
    import torch

    device = x.device.type
    if torch.is_autocast_enabled(device):
        x = x.to(torch.get_autocast_dtype(device))
    return type(layer).forward(layer, x)
