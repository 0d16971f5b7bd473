"""The recommended learning rate (train_core.hyperparams.get_lr) agrees with tinker-cookbook's own
`hyperparam_utils.get_lr` for every model of the recommended-renderer table: the same number, or
both refuse (the families the cookbook has no calibrated exponent for)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kitchen.app.model_dims import model_dims, recommended_lr
from train_core.hyperparams import KNOWN_MODELS, get_lr
from train_core.renderers.recommended import recommended_models

cookbook = pytest.importorskip("tinker_cookbook.hyperparam_utils")


def test_every_model_with_a_recommended_renderer_has_a_hidden_size() -> None:
    assert set(recommended_models()) <= set(KNOWN_MODELS)


@pytest.mark.parametrize("model", recommended_models())
@pytest.mark.parametrize("is_lora", [True, False])
def test_get_lr_equals_the_cookbooks(model: str, is_lora: bool) -> None:
    try:
        expected = cookbook.get_lr(model, is_lora=is_lora)
    except (NotImplementedError, ValueError) as e:  # ConfigurationError is a ValueError
        with pytest.raises(ValueError, match="no calibrated formula"):
            get_lr(model, is_lora=is_lora)
        assert "not yet calibrated" in str(e) or "Unknown model" in str(e)
        return
    assert get_lr(model, is_lora=is_lora) == pytest.approx(expected, rel=1e-12)
    assert get_lr(f"{model}:peft:262144", is_lora=is_lora) == pytest.approx(expected, rel=1e-12)


def test_the_table_holds_llama_and_qwen_and_refuses_the_rest() -> None:
    """Not every answer is a refusal: the parity above compares numbers for most of the table."""
    numbers = [m for m in recommended_models() if KNOWN_MODELS[m][0] is not None]
    assert len(numbers) >= 25 and "Qwen/Qwen3.5-9B" in numbers
    assert get_lr("Qwen/Qwen3.5-9B") == pytest.approx(5e-4 * (2000 / 4096) ** 0.0775)


def _local_model(folder: Path, **config: object) -> Path:
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def test_a_local_config_gives_the_hidden_size(tmp_path: Path) -> None:
    """A model on this machine: its config.json's hidden size (text_config's for a multimodal
    one) and model_type, where the name says neither."""
    dense = _local_model(tmp_path / "my-model", model_type="qwen3", hidden_size=1000,
                         num_attention_heads=8, num_hidden_layers=2, intermediate_size=64,
                         vocab_size=100)  # fmt: skip
    assert recommended_lr(str(dense)) == pytest.approx(5e-4 * 2.0**0.0775)
    assert recommended_lr(str(dense), is_lora=False) == pytest.approx(5e-5 * 2.0**0.0775)
    dims = model_dims(str(dense))
    assert dims is not None and dims.hidden_size == 1000
    vlm = _local_model(tmp_path / "Qwen3-VL-local", model_type="qwen3_vl",
                       text_config={"model_type": "qwen3_vl_text", "hidden_size": 4000})  # fmt: skip
    assert recommended_lr(str(vlm)) == pytest.approx(5e-4 * 0.5**0.0775)
    unknown = _local_model(tmp_path / "mystery", model_type="mamba", hidden_size=512)
    with pytest.raises(ValueError, match="no calibrated formula"):
        recommended_lr(str(unknown))


def test_tiny_and_table_models_without_a_local_config() -> None:
    from kitchen.adapters.local.model.tiny import TINY_MODELS

    for name, spec in TINY_MODELS.items():  # the table says what the built-in model is
        assert KNOWN_MODELS[name][1] == spec.hidden_size, name
        assert recommended_lr(name) == pytest.approx(get_lr(name, hidden_size=spec.hidden_size))
    assert recommended_lr("Qwen/Qwen3.8-27B") == pytest.approx(get_lr("Qwen/Qwen3.8-27B"))
