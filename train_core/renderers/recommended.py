"""Which renderer a model was trained with: tinker-cookbook 0.6.1's table, plus SmolLM2 and kitchen/tiny-*.

Names are returned as tinker-cookbook returns them, also for the few formats train_core does not
build yet (`NOT_BUILT`): `get_renderer` then fails naming the format, rather than a wrong format
being picked silently. A model with a chat template and no entry here can use `hf_template`.
"""

from __future__ import annotations

from train_core.renderers.types import RendererError

_LLAMA3 = ("llama3",)
_ROLE_COLON = ("role_colon",)
_QWEN3 = ("qwen3", "qwen3_disable_thinking")
_QWEN3_INSTRUCT = ("qwen3_instruct",)
_QWEN3_VL_INSTRUCT = ("qwen3_vl_instruct",)
_QWEN3_5 = ("qwen3_5", "qwen3_5_disable_thinking", "qwen3_5_preserve_thinking")
_QWEN3_8 = (
    "qwen3_8_xhigh_reasoning",
    "qwen3_8_disable_thinking",
    "qwen3_8_medium_reasoning",
    "qwen3_8_low_reasoning",
)
_DEEPSEEKV3 = ("deepseekv3", "deepseekv3_thinking")
_DEEPSEEKV4_1 = (
    "deepseekv4_1",
    "deepseekv4_1_low_reasoning",
    "deepseekv4_1_max_reasoning",
    "deepseekv4_1_disable_thinking",
    "deepseekv4_1_preserve_thinking",
)
_GPT_OSS = ("gpt_oss_no_sysprompt", "gpt_oss_medium_reasoning")
_KIMI_K2 = ("kimi_k2",)
_KIMI_K25 = ("kimi_k25", "kimi_k25_disable_thinking")
_KIMI_K26 = ("kimi_k26", "kimi_k26_disable_thinking", "kimi_k26_preserve_thinking")
_KIMI_K31_PRO = (
    "kimi_k31_pro_max_reasoning",
    "kimi_k31_pro_high_reasoning",
    "kimi_k31_pro_low_reasoning",
    "kimi_k31_pro_disable_thinking",
    "kimi_k31_pro_no_reasoning_effort",
)
_GLM5_3 = ("glm5_3_max_reasoning", "glm5_3_low_reasoning", "glm5_3_high_reasoning")
_NEMOTRON3 = ("nemotron3", "nemotron3_disable_thinking", "nemotron3_preserve_thinking")
_NEMOTRON3_ULTRA = (
    "nemotron3_ultra",
    "nemotron3_ultra_disable_thinking",
    "nemotron3_ultra_medium_thinking",
    "nemotron3_ultra_preserve_thinking",
)
_NEMOTRON3_LIGHTNING = (
    "nemotron3_ultra",
    "nemotron3_ultra_disable_thinking",
    "nemotron3_ultra_preserve_thinking",
)
_CHATML = ("chatml", "chatml_smollm2")

_MODELS: dict[str, tuple[str, ...]] = {
    "meta-llama/Llama-3.1-8B-Instruct": _LLAMA3,
    "meta-llama/Llama-3.3-70B-Instruct": _LLAMA3,
    "meta-llama/Llama-3.2-1B": _ROLE_COLON,
    "meta-llama/Llama-3.2-3B": _ROLE_COLON,
    "meta-llama/Llama-3.1-8B": _ROLE_COLON,
    "meta-llama/Llama-3.1-70B": _ROLE_COLON,
    "Qwen/Qwen3-VL-30B-A3B-Instruct": _QWEN3_VL_INSTRUCT,
    "Qwen/Qwen3-VL-235B-A22B-Instruct": _QWEN3_VL_INSTRUCT,
    "Qwen/Qwen3-8B-Base": _ROLE_COLON,
    "Qwen/Qwen3-30B-A3B-Base": _ROLE_COLON,
    "Qwen/Qwen3-8B": _QWEN3,
    "Qwen/Qwen3-32B": _QWEN3,
    "Qwen/Qwen3-30B-A3B": _QWEN3,
    "Qwen/Qwen3-4B-Instruct-2507": _QWEN3_INSTRUCT,
    "Qwen/Qwen3-30B-A3B-Instruct-2507": _QWEN3_INSTRUCT,
    "Qwen/Qwen3-235B-A22B-Instruct-2507": _QWEN3_INSTRUCT,
    "Qwen/Qwen3.5-4B": _QWEN3_5,
    "Qwen/Qwen3.5-9B": _QWEN3_5,
    "Qwen/Qwen3.5-9B-Base": _ROLE_COLON,
    "Qwen/Qwen3.5-27B": _QWEN3_5,
    "Qwen/Qwen3.5-35B-A3B": _QWEN3_5,
    "Qwen/Qwen3.5-35B-A3B-Base": _ROLE_COLON,
    "Qwen/Qwen3.5-397B-A17B": _QWEN3_5,
    "Qwen/Qwen3.6-27B": _QWEN3_5,
    "Qwen/Qwen3.6-35B-A3B": _QWEN3_5,
    "Qwen/Qwen3.8-27B": _QWEN3_8,
    "deepseek-ai/DeepSeek-V3.1": _DEEPSEEKV3,
    "deepseek-ai/DeepSeek-V3.1-Base": _ROLE_COLON,
    "deepseek-ai/DeepSeek-V4.1-Flash": _DEEPSEEKV4_1,
    "deepseek-ai/DeepSeek-V4.1-Flash-1017": _DEEPSEEKV4_1,
    "openai/gpt-oss-20b": _GPT_OSS,
    "openai/gpt-oss-120b": _GPT_OSS,
    "moonshotai/Kimi-K2-Thinking": _KIMI_K2,
    "moonshotai/Kimi-K2.5": _KIMI_K25,
    "moonshotai/Kimi-K2.6": _KIMI_K26,
    "moonshotai/Kimi-K3.1-Pro": _KIMI_K31_PRO,
    "zai-org/GLM-5.3": _GLM5_3,
    "zai-org/GLM-5.3-Flash": _GLM5_3,
    "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16": _NEMOTRON3,
    "nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-BF16": (*_NEMOTRON3, "nemotron3_low_thinking"),
    "nvidia/NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16": _NEMOTRON3_ULTRA,
    "nvidia/NVIDIA-Nemotron-3.5-Lightning-30B-A3B-BF16": _NEMOTRON3_LIGHTNING,
    "nvidia/NVIDIA-Nemotron-3.5-Super-VL-120B-A12B-BF16": _NEMOTRON3_ULTRA,
}


NOT_BUILT = frozenset(
    {
        *_KIMI_K31_PRO,
        "tml_v0",  # Inkling: rendered by the separate tml-renderers package
    }
)
"""Recommended names that train_core has no renderer for yet."""


def recommended_models() -> list[str]:
    """Every model name with a table entry (tinker-cookbook 0.6.1's list)."""
    return list(_MODELS)


def get_recommended_renderer_names(model_name: str) -> list[str]:
    """Renderer names designed for the model, most recommended first.

    Accepts "org/model" names (an optional ":checkpoint" suffix is ignored), any SmolLM2 name
    (e.g. "HuggingFaceTB/SmolLM2-135M-Instruct") and "kitchen/tiny-*".
    """
    name = model_name.split(":", 1)[0]
    if name in _MODELS:
        return list(_MODELS[name])
    if name.startswith("kitchen/tiny") or "smollm2" in name.lower():
        return list(_CHATML)
    if name.startswith("thinkingmachines/Inkling"):
        return ["tml_v0"]
    raise RendererError(
        f"no recommended renderer for model {model_name!r}; pass a renderer name explicitly "
        "(e.g. chatml, llama3, qwen3, role_colon)"
    )


def get_recommended_renderer_name(model_name: str) -> str:
    """The most recommended renderer name for the model (see get_recommended_renderer_names)."""
    return get_recommended_renderer_names(model_name)[0]
