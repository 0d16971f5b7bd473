"""The recommended-renderer table: tinker-cookbook 0.6.1's every model, and only names that build."""

from __future__ import annotations

from typing import Any

import pytest

from train_core.renderers import (
    builtin_renderer_names,
    get_recommended_renderer_names,
    get_renderer,
)
from train_core.renderers.recommended import NOT_BUILT, recommended_models


@pytest.mark.parametrize("model", recommended_models())
def test_every_recommended_name_is_a_builtin_renderer(model: str) -> None:
    missing = set(get_recommended_renderer_names(model)) - set(builtin_renderer_names())
    assert missing <= NOT_BUILT, f"{model} recommends unregistered {sorted(missing - NOT_BUILT)}"


def test_not_built_lists_only_names_that_really_are_missing() -> None:
    # A format that gets built must leave NOT_BUILT, so the table test above covers it.
    assert not NOT_BUILT & set(builtin_renderer_names())


@pytest.mark.parametrize(
    "model",
    [m for m in recommended_models() if not NOT_BUILT & set(get_recommended_renderer_names(m))],
)
def test_model_name_alone_builds_its_renderer(test_tokenizer: Any, model: str) -> None:
    renderer = get_renderer(get_recommended_renderer_names(model)[0], test_tokenizer)
    assert renderer.get_stop_sequences()


def test_table_is_tinker_cookbooks() -> None:
    model_info = pytest.importorskip(
        "tinker_cookbook.model_info", reason="tinker-cookbook 0.6.1 not installed"
    )
    families = {
        "meta-llama": model_info.get_llama_info,
        "Qwen": model_info.get_qwen_info,
        "deepseek-ai": model_info.get_deepseek_info,
        "openai": model_info.get_gpt_oss_info,
        "moonshotai": model_info.get_moonshot_info,
        "zai-org": model_info.get_zai_info,
        "nvidia": model_info.get_nvidia_info,
    }
    reference = {
        f"{org}/{version}": list(attributes.recommended_renderers)
        for org, table in families.items()
        for version, attributes in table().items()
    }
    assert {m: get_recommended_renderer_names(m) for m in recommended_models()} == reference
