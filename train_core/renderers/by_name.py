"""Renderers by name: the built-in formats, plus any registered with `register_renderer`."""

from __future__ import annotations

import difflib
from collections.abc import Callable
from typing import Any, TypeAlias

from train_core.renderers.base import Renderer
from train_core.renderers.chatml import SMOLLM2_SYSTEM_PROMPT, ChatMLRenderer
from train_core.renderers.deepseek_v3 import (
    DeepSeekV3DisableThinkingRenderer,
    DeepSeekV3ThinkingRenderer,
)
from train_core.renderers.deepseek_v4_1 import DeepSeekV4_1Renderer
from train_core.renderers.glm5_3 import Glm5_3Renderer
from train_core.renderers.gpt_oss import GptOssRenderer
from train_core.renderers.hf_template import HFTemplateRenderer
from train_core.renderers.kimi_k2 import KimiK2Renderer
from train_core.renderers.kimi_k25 import KimiK25Renderer
from train_core.renderers.llama3 import Llama3Renderer
from train_core.renderers.nemotron3 import Nemotron3Renderer
from train_core.renderers.qwen3 import (
    Qwen3DisableThinkingRenderer,
    Qwen3InstructRenderer,
    Qwen3Renderer,
)
from train_core.renderers.qwen3_5 import Qwen3_5Renderer
from train_core.renderers.qwen3_8 import Qwen3_8Renderer
from train_core.renderers.qwen3_vl import Qwen3VLRenderer
from train_core.renderers.recommended import get_recommended_renderer_name
from train_core.renderers.role_colon import RoleColonRenderer
from train_core.renderers.types import RendererError, Tokenizer

RendererFactory: TypeAlias = Callable[[Tokenizer, Any], Renderer]
"""`factory(tokenizer, image_processor) -> Renderer`; image_processor is None for text models."""

_BUILTIN: dict[str, RendererFactory] = {
    "role_colon": lambda tok, _: RoleColonRenderer(tok),
    "llama3": lambda tok, _: Llama3Renderer(tok),
    "qwen3": lambda tok, _: Qwen3Renderer(tok),
    "qwen3_disable_thinking": lambda tok, _: Qwen3DisableThinkingRenderer(tok),
    "qwen3_instruct": lambda tok, _: Qwen3InstructRenderer(tok),
    "qwen3_vl": lambda tok, images: Qwen3VLRenderer(tok, images),
    "qwen3_vl_instruct": lambda tok, images: Qwen3VLRenderer(tok, images, thinking=False),
    "qwen3_5": lambda tok, images: Qwen3_5Renderer(tok, images),
    "qwen3_5_disable_thinking": lambda tok, images: Qwen3_5Renderer(tok, images, thinking=False),
    "qwen3_5_preserve_thinking": lambda tok, images: Qwen3_5Renderer(
        tok, images, strip_thinking_from_history=False
    ),
    "qwen3_8_xhigh_reasoning": lambda tok, images: Qwen3_8Renderer(tok, images, "xhigh"),
    "qwen3_8_medium_reasoning": lambda tok, images: Qwen3_8Renderer(tok, images, "medium"),
    "qwen3_8_low_reasoning": lambda tok, images: Qwen3_8Renderer(tok, images, "low"),
    "qwen3_8_disable_thinking": lambda tok, images: Qwen3_8Renderer(tok, images, "none"),
    # As in tinker-cookbook, the Nano/Super names are text-only (no image processor).
    "nemotron3": lambda tok, _: Nemotron3Renderer(tok),
    "nemotron3_low_thinking": lambda tok, _: Nemotron3Renderer(tok, reasoning="low"),
    "nemotron3_disable_thinking": lambda tok, _: Nemotron3Renderer(tok, reasoning="none"),
    "nemotron3_preserve_thinking": lambda tok, _: Nemotron3Renderer(
        tok, strip_thinking_from_history=False
    ),
    "nemotron3_ultra": lambda tok, images: Nemotron3Renderer(tok, images, ultra=True),
    "nemotron3_ultra_disable_thinking": lambda tok, images: Nemotron3Renderer(
        tok, images, "none", ultra=True
    ),
    "nemotron3_ultra_medium_thinking": lambda tok, images: Nemotron3Renderer(
        tok, images, "medium", ultra=True
    ),
    "nemotron3_ultra_preserve_thinking": lambda tok, images: Nemotron3Renderer(
        tok, images, ultra=True, strip_thinking_from_history=False
    ),
    # tinker-cookbook's "deepseekv3" is the template's default mode: thinking off.
    "deepseekv3": lambda tok, _: DeepSeekV3DisableThinkingRenderer(tok),
    "deepseekv3_disable_thinking": lambda tok, _: DeepSeekV3DisableThinkingRenderer(tok),
    "deepseekv3_thinking": lambda tok, _: DeepSeekV3ThinkingRenderer(tok),
    "deepseekv4_1": lambda tok, _: DeepSeekV4_1Renderer(tok),
    "deepseekv4_1_low_reasoning": lambda tok, _: DeepSeekV4_1Renderer(tok, "low"),
    "deepseekv4_1_max_reasoning": lambda tok, _: DeepSeekV4_1Renderer(tok, "max"),
    "deepseekv4_1_disable_thinking": lambda tok, _: DeepSeekV4_1Renderer(tok, None),
    "deepseekv4_1_preserve_thinking": lambda tok, _: DeepSeekV4_1Renderer(
        tok, strip_thinking_from_history=False
    ),
    "glm5_3_max_reasoning": lambda tok, _: Glm5_3Renderer(tok, "max"),
    "glm5_3_high_reasoning": lambda tok, _: Glm5_3Renderer(tok, "high"),
    "glm5_3_low_reasoning": lambda tok, _: Glm5_3Renderer(tok, "low"),
    "kimi_k2": lambda tok, _: KimiK2Renderer(tok),
    # K2.6's template renders K2.5's tokens; only its preserve_thinking option is new.
    "kimi_k25": lambda tok, images: KimiK25Renderer(tok, images),
    "kimi_k25_disable_thinking": lambda tok, images: KimiK25Renderer(tok, images, thinking=False),
    "kimi_k26": lambda tok, images: KimiK25Renderer(tok, images),
    "kimi_k26_disable_thinking": lambda tok, images: KimiK25Renderer(tok, images, thinking=False),
    "kimi_k26_preserve_thinking": lambda tok, images: KimiK25Renderer(
        tok, images, strip_thinking_from_history=False
    ),
    "gpt_oss_no_sysprompt": lambda tok, _: GptOssRenderer(tok, use_system_prompt=False),
    "gpt_oss_low_reasoning": lambda tok, _: GptOssRenderer(tok, True, "low"),
    "gpt_oss_medium_reasoning": lambda tok, _: GptOssRenderer(tok, True, "medium"),
    "gpt_oss_high_reasoning": lambda tok, _: GptOssRenderer(tok, True, "high"),
    "chatml": lambda tok, _: ChatMLRenderer(tok),
    "chatml_smollm2": lambda tok, _: ChatMLRenderer(
        tok, default_system_prompt=SMOLLM2_SYSTEM_PROMPT
    ),
    "hf_template": lambda tok, _: HFTemplateRenderer(tok),
}

_CUSTOM: dict[str, RendererFactory] = {}


def register_renderer(name: str, factory: RendererFactory) -> None:
    """Make `get_renderer(name, tokenizer)` call `factory(tokenizer, image_processor)`.

    Registered names are looked up before the built-in ones, so a registration can replace a
    built-in format; namespaced names ("org/format") avoid that by accident.
    """
    _CUSTOM[name] = factory


def unregister_renderer(name: str) -> bool:
    """Forget a registered renderer; False when `name` was not registered."""
    return _CUSTOM.pop(name, None) is not None


def get_registered_renderer_names() -> list[str]:
    """Names registered with `register_renderer` (not the built-in ones)."""
    return list(_CUSTOM)


def is_renderer_registered(name: str) -> bool:
    """Whether `name` was registered with `register_renderer`."""
    return name in _CUSTOM


def builtin_renderer_names() -> list[str]:
    """Every built-in renderer name."""
    return list(_BUILTIN)


def get_renderer(
    name: str,
    tokenizer: Tokenizer,
    image_processor: Any = None,
    model_name: str | None = None,
) -> Renderer:
    """The renderer called `name` over `tokenizer` (registered names first, then built-ins).

    model_name is recorded on the renderer for logs (default: the tokenizer's name_or_path).
    """
    factory = _CUSTOM.get(name) or _BUILTIN.get(name)
    if factory is None:
        known = sorted({*_BUILTIN, *_CUSTOM})
        raise RendererError(
            f"unknown renderer {name!r}; expected one of {', '.join(known)} "
            "(or register one with train_core.renderers.register_renderer)"
        )
    renderer = factory(tokenizer, image_processor)
    renderer._renderer_name = name
    renderer._model_name = (
        model_name if model_name is not None else getattr(tokenizer, "name_or_path", None)
    )
    return renderer


def resolve_renderer_name(model_name: str, renderer_name: str | None = None) -> str:
    """The renderer a run of `model_name` uses: `renderer_name` when given, else the model's
    recommended one; either must be registered. Needs no tokenizer, so a dry run answers it
    before any weights load, and a wrong or missing format fails at build time, not at step 0."""
    if renderer_name is None:
        try:
            renderer_name = get_recommended_renderer_name(model_name)
        except RendererError:
            raise RendererError(
                f"model {model_name!r} has no recommended renderer; pass --renderer-name NAME "
                "(e.g. chatml, llama3, qwen3_5), or hf_template to use the tokenizer's own chat "
                "template"
            ) from None
    if renderer_name not in _CUSTOM and renderer_name not in _BUILTIN:
        close = difflib.get_close_matches(renderer_name, [*_BUILTIN, *_CUSTOM], n=1)
        hint = f"; did you mean {close[0]!r}?" if close else "; see train_core.renderers"
        raise RendererError(
            f"renderer {renderer_name!r} (for model {model_name!r}) is not built in Kitchen{hint}"
        )
    return renderer_name
