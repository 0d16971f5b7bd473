"""Renderers by name, custom registrations, and the recommended renderer per model."""

from __future__ import annotations

from typing import Any

import pytest

from tests.renderers.harness import CORE_RENDERER_NAMES
from train_core.renderers import (
    RendererError,
    builtin_renderer_names,
    get_recommended_renderer_name,
    get_recommended_renderer_names,
    get_registered_renderer_names,
    get_renderer,
    is_renderer_registered,
    register_renderer,
    unregister_renderer,
)
from train_core.renderers.chatml import ChatMLRenderer
from train_core.renderers.qwen3 import Qwen3Renderer

REQUIRED = [*CORE_RENDERER_NAMES, "chatml"]


@pytest.mark.parametrize("name", REQUIRED)
def test_every_builtin_name_builds_a_renderer(test_tokenizer: Any, name: str) -> None:
    renderer = get_renderer(name, test_tokenizer, model_name="some/model")
    assert name in builtin_renderer_names()
    assert renderer._renderer_name == name and renderer._model_name == "some/model"
    assert renderer.get_stop_sequences()


def test_unknown_name_is_refused_with_the_known_ones(test_tokenizer: Any) -> None:
    with pytest.raises(RendererError, match=r"unknown renderer 'qwen9'; expected one of .*chatml"):
        get_renderer("qwen9", test_tokenizer)


def test_registered_factory_is_used_and_can_be_removed(test_tokenizer: Any) -> None:
    seen: list[Any] = []

    def factory(tokenizer: Any, image_processor: Any) -> ChatMLRenderer:
        seen.append(image_processor)
        return ChatMLRenderer(tokenizer, default_system_prompt="Custom.")

    register_renderer("acme/chatml_custom", factory)
    try:
        assert is_renderer_registered("acme/chatml_custom")
        assert "acme/chatml_custom" in get_registered_renderer_names()
        renderer = get_renderer("acme/chatml_custom", test_tokenizer)
        prompt = renderer.build_generation_prompt([{"role": "user", "content": "Hi"}])
        assert test_tokenizer.decode(prompt.to_ints()).startswith("<|im_start|>system\nCustom.")
        assert seen == [None]
    finally:
        assert unregister_renderer("acme/chatml_custom")
    assert not is_renderer_registered("acme/chatml_custom")
    assert not unregister_renderer("acme/chatml_custom")
    with pytest.raises(RendererError):
        get_renderer("acme/chatml_custom", test_tokenizer)


def test_registration_can_replace_a_builtin(test_tokenizer: Any) -> None:
    register_renderer("qwen3", lambda tok, _: Qwen3Renderer(tok, strip_thinking_from_history=False))
    try:
        assert get_renderer("qwen3", test_tokenizer).has_extension_property
    finally:
        unregister_renderer("qwen3")
    assert not get_renderer("qwen3", test_tokenizer).has_extension_property


@pytest.mark.parametrize(
    ("model", "renderer"),
    [
        ("meta-llama/Llama-3.1-8B-Instruct", "llama3"),
        ("meta-llama/Llama-3.2-1B", "role_colon"),
        ("Qwen/Qwen3-8B", "qwen3"),
        ("Qwen/Qwen3-30B-A3B-Instruct-2507", "qwen3_instruct"),
        ("Qwen/Qwen3-8B-Base", "role_colon"),
        ("deepseek-ai/DeepSeek-V3.1", "deepseekv3"),
        ("moonshotai/Kimi-K2-Thinking", "kimi_k2"),
        ("openai/gpt-oss-20b", "gpt_oss_no_sysprompt"),
        ("Qwen/Qwen3-8B:step-100", "qwen3"),  # a checkpoint suffix is ignored
        ("HuggingFaceTB/SmolLM2-135M-Instruct", "chatml"),
        ("smollm2", "chatml"),
        ("kitchen/tiny-llama", "chatml"),
        ("Qwen/Qwen3.5-9B", "qwen3_5"),
    ],
)
def test_recommended_renderer_per_model(model: str, renderer: str) -> None:
    assert get_recommended_renderer_name(model) == renderer


def test_recommended_alternatives_and_unknown_models() -> None:
    assert get_recommended_renderer_names("Qwen/Qwen3-8B") == ["qwen3", "qwen3_disable_thinking"]
    assert get_recommended_renderer_names("openai/gpt-oss-120b") == [
        "gpt_oss_no_sysprompt",
        "gpt_oss_medium_reasoning",
    ]
    with pytest.raises(RendererError, match="no recommended renderer for model 'acme/unknown'"):
        get_recommended_renderer_name("acme/unknown")


@pytest.mark.parametrize("name", builtin_renderer_names())
def test_renderers_pickle_for_multiprocess_rollouts(test_tokenizer: Any, name: str) -> None:
    import copy
    import pickle

    tokenizer = test_tokenizer
    if name == "hf_template":  # needs a tokenizer with a chat template
        tokenizer = copy.deepcopy(test_tokenizer)
        tokenizer.chat_template = (
            "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n"
            "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
        )
    renderer = get_renderer(name, tokenizer)
    copy = pickle.loads(pickle.dumps(renderer))
    messages = [{"role": "user", "content": "Hi"}]
    assert copy.build_generation_prompt(messages).to_ints() == (  # type: ignore[arg-type]
        renderer.build_generation_prompt(messages).to_ints()  # type: ignore[arg-type]
    )


def test_resolve_renderer_name_picks_the_recommended_format_without_a_tokenizer():
    from train_core.renderers import resolve_renderer_name

    assert resolve_renderer_name("Qwen/Qwen3.5-9B") == "qwen3_5"
    assert resolve_renderer_name("HuggingFaceTB/SmolLM2-135M-Instruct") == "chatml"
    assert resolve_renderer_name("my/model", "llama3") == "llama3"


def test_resolve_renderer_name_names_the_model_and_the_way_out():
    import pytest

    from train_core.renderers import RendererError, resolve_renderer_name

    with pytest.raises(
        RendererError,
        match=r"'acme/model-7b' has no recommended renderer.*--renderer-name.*hf_template",
    ):
        resolve_renderer_name("acme/model-7b")
    with pytest.raises(RendererError, match=r"renderer 'qwen3_55'.*did you mean 'qwen3_5'"):
        resolve_renderer_name("acme/model-7b", "qwen3_55")
