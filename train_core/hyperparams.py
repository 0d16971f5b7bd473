"""Recommended learning rate, as tinker-cookbook 0.6.1's `hyperparam_utils.get_lr`.

lr = 5e-5 * (10 if LoRA) * (2000 / hidden_size) ** exponent, with exponent 0.781 for Llama-family
models and 0.0775 for Qwen. SmolLM2 is a Llama-architecture model, so it takes the Llama exponent;
the built-in tiny models take the family their name says (qwen or llama). Hidden sizes come from
a table (no network lookups) or the `hidden_size` argument.

`lora_param_count` is the trainable-parameter count of a LoRA run, from the model's shapes
(`ModelDims`, read from its config.json or the table of known models).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

BASE_LR = 5e-5
LORA_LR_MULTIPLIER = 10.0  # 0.6.1 get_lora_lr_over_full_finetune_lr: 10, empirically
FAMILY_EXPONENTS: dict[str, float] = {"llama": 0.781, "qwen": 0.0775}

# model name -> (family, hidden size)
KNOWN_MODELS: dict[str, tuple[str, int]] = {
    "HuggingFaceTB/SmolLM2-135M": ("llama", 576),
    "HuggingFaceTB/SmolLM2-135M-Instruct": ("llama", 576),
    "kitchen/tiny-llama": ("llama", 64),
    "kitchen/tiny-qwen": ("qwen", 64),
    "meta-llama/Llama-3.2-1B": ("llama", 2048),
    "meta-llama/Llama-3.2-3B": ("llama", 3072),
    "meta-llama/Llama-3.1-8B": ("llama", 4096),
    "meta-llama/Llama-3.1-8B-Instruct": ("llama", 4096),
    "meta-llama/Llama-3.1-70B": ("llama", 8192),
    "meta-llama/Llama-3.3-70B-Instruct": ("llama", 8192),
    "Qwen/Qwen3-235B-A22B-Instruct-2507": ("qwen", 4096),
    "Qwen/Qwen3-30B-A3B-Instruct-2507": ("qwen", 2048),
    "Qwen/Qwen3-30B-A3B": ("qwen", 2048),
    "Qwen/Qwen3-30B-A3B-Base": ("qwen", 2048),
    "Qwen/Qwen3-32B": ("qwen", 5120),
    "Qwen/Qwen3-8B": ("qwen", 4096),
    "Qwen/Qwen3-8B-Base": ("qwen", 4096),
    "Qwen/Qwen3-4B-Instruct-2507": ("qwen", 2560),
    "Qwen/Qwen3-VL-235B-A22B-Instruct": ("qwen", 4096),
    "Qwen/Qwen3-VL-30B-A3B-Instruct": ("qwen", 2048),
}


def model_family(model_name: str) -> str:
    """'llama' or 'qwen' from the table or the name; other families have no calibrated formula."""
    base = model_name.split(":", 1)[0]  # Tinker variant suffixes such as ":peft:262144"
    if base in KNOWN_MODELS:
        return KNOWN_MODELS[base][0]
    lowered = base.lower()
    if "llama" in lowered or "smollm" in lowered:
        return "llama"
    if "qwen" in lowered:
        return "qwen"
    raise ValueError(
        f"recommended lr: no calibrated formula for model {model_name!r} (Llama and Qwen families "
        "only); set the learning rate explicitly"
    )


def get_lr(model_name: str, is_lora: bool = True, hidden_size: int | None = None) -> float:
    """Recommended learning rate; `hidden_size` overrides the table (needed for unknown names)."""
    family = model_family(model_name)
    if hidden_size is None:
        base = model_name.split(":", 1)[0]
        if base not in KNOWN_MODELS:
            raise ValueError(
                f"recommended lr: hidden size of {model_name!r} is not in the table; pass hidden_size"
            )
        hidden_size = KNOWN_MODELS[base][1]
    if hidden_size <= 0:
        raise ValueError(f"recommended lr: hidden_size is {hidden_size}; expected > 0")
    lr = BASE_LR * (LORA_LR_MULTIPLIER if is_lora else 1.0)
    return lr * (2000 / hidden_size) ** FAMILY_EXPONENTS[family]


@dataclass(frozen=True)
class ModelDims:
    """The shapes LoRA adapts: a decoder's attention, MLP and unembedding projections."""

    hidden_size: int
    num_layers: int
    intermediate_size: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    vocab_size: int

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> ModelDims:
        """From a transformers config.json (a multimodal one's `text_config` when present)."""
        text = config.get("text_config") or config
        try:
            hidden, heads = int(text["hidden_size"]), int(text["num_attention_heads"])
            return cls(
                hidden,
                int(text["num_hidden_layers"]),
                int(text["intermediate_size"]),
                heads,
                int(text.get("num_key_value_heads") or heads),
                int(text.get("head_dim") or hidden // heads),
                int(text["vocab_size"]),
            )
        except (KeyError, TypeError) as e:
            raise ValueError(
                f"model config lacks {e} (a dense decoder's config expected)"
            ) from None


# Published configs of crucible_kitchen's and tinker-cookbook's default models (no network lookups).
KNOWN_DIMS: dict[str, ModelDims] = {
    "HuggingFaceTB/SmolLM2-135M": ModelDims(576, 30, 1536, 9, 3, 64, 49152),
    "HuggingFaceTB/SmolLM2-135M-Instruct": ModelDims(576, 30, 1536, 9, 3, 64, 49152),
    "meta-llama/Llama-3.2-1B": ModelDims(2048, 16, 8192, 32, 8, 64, 128256),
    "meta-llama/Llama-3.2-3B": ModelDims(3072, 28, 8192, 24, 8, 128, 128256),
    "meta-llama/Llama-3.1-8B": ModelDims(4096, 32, 14336, 32, 8, 128, 128256),
    "meta-llama/Llama-3.1-8B-Instruct": ModelDims(4096, 32, 14336, 32, 8, 128, 128256),
    "meta-llama/Llama-3.1-70B": ModelDims(8192, 80, 28672, 64, 8, 128, 128256),
    "Qwen/Qwen3-8B": ModelDims(4096, 36, 12288, 32, 8, 128, 151936),
    "Qwen/Qwen3-8B-Base": ModelDims(4096, 36, 12288, 32, 8, 128, 151936),
    "Qwen/Qwen3-32B": ModelDims(5120, 64, 25600, 64, 8, 128, 151936),
}


def lora_param_count(dims: ModelDims, lora_rank: int) -> int:
    """Trainable parameters of rank-r LoRA on every attention and MLP projection and the
    unembedding, as Tinker trains them: r * (d_in + d_out) per adapted matrix (tinker-cookbook's
    `get_lora_param_count` sums the same over the checkpoint's 2-D weights, embeddings excluded)."""
    if lora_rank < 0:
        raise ValueError(f"lora_rank is {lora_rank}; expected >= 0")
    h, q, kv = dims.hidden_size, dims.num_heads * dims.head_dim, dims.num_kv_heads * dims.head_dim
    attention = (h + q) + 2 * (h + kv) + (q + h)  # q, k, v, o
    mlp = 3 * (h + dims.intermediate_size)  # gate, up, down
    return lora_rank * (dims.num_layers * (attention + mlp) + (h + dims.vocab_size))
