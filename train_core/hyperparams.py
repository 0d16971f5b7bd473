"""Recommended learning rate, as tinker-cookbook 0.6.1's `hyperparam_utils.get_lr`.

lr = 5e-5 * (10 if LoRA) * (2000 / hidden_size) ** exponent, with exponent 0.781 for Llama-family
models and 0.0775 for Qwen. SmolLM2 is a Llama-architecture model, so it takes the Llama exponent;
the built-in tiny models take the family their name says (qwen or llama). The other families
tinker serves (DeepSeek, gpt-oss, Kimi, GLM, Nemotron, Inkling) have no calibrated exponent: their
learning rate is refused, as the cookbook refuses it. Hidden sizes come from a table of every
model with a recommended renderer (no network lookups) or the `hidden_size` argument (the caller
read it from a local config: kitchen/app/model_dims.py).

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
UNCALIBRATED = None  # a family tinker serves that has no exponent yet

# model name -> (family, hidden size of the text decoder): every model of
# train_core.renderers.recommended's table (a test holds them equal), SmolLM2 and the tiny models
KNOWN_MODELS: dict[str, tuple[str | None, int]] = {
    "HuggingFaceTB/SmolLM2-135M": ("llama", 576),
    "HuggingFaceTB/SmolLM2-135M-Instruct": ("llama", 576),
    "kitchen/tiny-llama": ("llama", 128),
    "kitchen/tiny-qwen": ("qwen", 128),
    "kitchen/tiny-qwen3-vl": ("qwen", 64),
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
    "Qwen/Qwen3.5-397B-A17B": ("qwen", 4096),
    "Qwen/Qwen3.5-35B-A3B": ("qwen", 2048),
    "Qwen/Qwen3.5-35B-A3B-Base": ("qwen", 2048),
    "Qwen/Qwen3.5-27B": ("qwen", 5120),
    "Qwen/Qwen3.5-9B": ("qwen", 4096),
    "Qwen/Qwen3.5-9B-Base": ("qwen", 4096),
    "Qwen/Qwen3.5-4B": ("qwen", 2560),
    "Qwen/Qwen3.6-27B": ("qwen", 5120),
    "Qwen/Qwen3.6-35B-A3B": ("qwen", 2048),
    "Qwen/Qwen3.8-27B": ("qwen", 5120),
    "deepseek-ai/DeepSeek-V3.1": (UNCALIBRATED, 7168),
    "deepseek-ai/DeepSeek-V3.1-Base": (UNCALIBRATED, 7168),
    "deepseek-ai/DeepSeek-V4.1-Flash": (UNCALIBRATED, 5120),
    "deepseek-ai/DeepSeek-V4.1-Flash-1017": (UNCALIBRATED, 5120),
    "moonshotai/Kimi-K2-Thinking": (UNCALIBRATED, 7168),
    "moonshotai/Kimi-K2.5": (UNCALIBRATED, 7168),
    "moonshotai/Kimi-K2.6": (UNCALIBRATED, 7168),
    "moonshotai/Kimi-K3.1-Pro": (UNCALIBRATED, 7168),
    "openai/gpt-oss-120b": (UNCALIBRATED, 2880),
    "openai/gpt-oss-20b": (UNCALIBRATED, 2880),
    "zai-org/GLM-5.3": (UNCALIBRATED, 6144),
    "zai-org/GLM-5.3-Flash": (UNCALIBRATED, 4096),
    "nvidia/NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16": (UNCALIBRATED, 8192),
    "nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-BF16": (UNCALIBRATED, 4096),
    "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16": (UNCALIBRATED, 2688),
    "nvidia/NVIDIA-Nemotron-3.5-Lightning-30B-A3B-BF16": (UNCALIBRATED, 2688),
    "nvidia/NVIDIA-Nemotron-3.5-Super-VL-120B-A12B-BF16": (UNCALIBRATED, 4096),
    "thinkingmachines/Inkling": (UNCALIBRATED, 6144),
    "thinkingmachines/Inkling-Small": (UNCALIBRATED, 4096),
    "thinkingmachines/Inkling-2-Small": (UNCALIBRATED, 4608),
}

# a transformers config's model_type -> family, for a local folder whose name says neither
MODEL_TYPE_FAMILIES = {"llama": "llama", "qwen2": "qwen", "qwen3": "qwen", "qwen3_moe": "qwen"}


def _no_formula(model_name: str) -> ValueError:
    return ValueError(
        f"recommended lr: no calibrated formula for model {model_name!r} (Llama and Qwen families "
        "only); set the learning rate explicitly"
    )


def model_family(model_name: str) -> str:
    """'llama' or 'qwen' from the table or the name; other families have no calibrated formula."""
    base = model_name.split(":", 1)[0]  # Tinker variant suffixes such as ":peft:262144"
    if base in KNOWN_MODELS:
        family = KNOWN_MODELS[base][0]
        if family is None:
            raise _no_formula(model_name)
        return family
    lowered = base.lower()
    if "llama" in lowered or "smollm" in lowered:
        return "llama"
    if "qwen" in lowered:
        return "qwen"
    raise _no_formula(model_name)


def get_lr(
    model_name: str,
    is_lora: bool = True,
    hidden_size: int | None = None,
    family: str | None = None,
) -> float:
    """Recommended learning rate; `hidden_size` and `family` (llama | qwen) override the table
    and the name (what a local config says, for names the table lacks)."""
    family = family or model_family(model_name)
    if family not in FAMILY_EXPONENTS:
        raise _no_formula(model_name)
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
