"""A model's shapes without loading it, for the dry run's LoRA parameter count and the recommended
learning rate (`learning_rate=auto`): a local folder's config.json or the config.json in the local
Hugging Face cache when the model is here, else a built-in tiny model's spec or the table of known
models. Nothing is downloaded."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from train_core.hyperparams import KNOWN_DIMS, MODEL_TYPE_FAMILIES, ModelDims, get_lr


def local_config(model_name: str) -> dict[str, Any] | None:
    """The config.json of `model_name` where it is on this machine (a folder, or the HF cache)."""
    base = model_name.split(":", 1)[0]  # Tinker variant suffixes such as ":peft:262144"
    folder = Path(base).expanduser()
    path: Path | None = folder / "config.json" if (folder / "config.json").is_file() else None
    if path is None and base.count("/") == 1 and not base.lower().startswith("kitchen/"):
        from huggingface_hub import try_to_load_from_cache

        cached = try_to_load_from_cache(base, "config.json")
        path = Path(cached) if isinstance(cached, str) else None
    if path is None:
        return None
    try:
        config = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return config if isinstance(config, dict) else None


def model_dims(model_name: str) -> ModelDims | None:
    """The shapes of `model_name`, or None when no config of it is at hand offline."""
    base = model_name.split(":", 1)[0]
    config = local_config(base)
    if config is not None:
        try:
            return ModelDims.from_config(config)
        except ValueError:
            pass  # not a dense decoder we can count: the table, else "unknown"
    if base in KNOWN_DIMS:
        return KNOWN_DIMS[base]
    if base.lower().startswith("kitchen/"):
        return _tiny_dims(base.lower())
    return None


def recommended_lr(model_name: str, is_lora: bool = True) -> float:
    """train_core's get_lr with the hidden size (and, for a name that says no family, the family)
    of the local config when the model is here; else the table's. ValueError when neither knows."""
    config = local_config(model_name)
    if config is None and model_name.lower().startswith("kitchen/"):
        from kitchen.adapters.local.model.tiny import TINY_MODELS

        spec = TINY_MODELS.get(model_name.lower())
        return get_lr(model_name, is_lora, spec.hidden_size if spec else None)
    if config is None:
        return get_lr(model_name, is_lora)
    text = config.get("text_config") or config  # a multimodal model's decoder
    hidden = text.get("hidden_size")
    family = MODEL_TYPE_FAMILIES.get(str(text.get("model_type") or config.get("model_type")))
    return get_lr(model_name, is_lora, int(hidden) if hidden else None, family)


def _tiny_dims(name: str) -> ModelDims | None:
    from kitchen.adapters.local.model.tiny import TINY_MODELS, tiny_vocabulary

    spec = TINY_MODELS.get(name)
    if spec is None:
        return None
    tokenizer = tiny_vocabulary(spec)
    vocab = {
        **tokenizer["model"]["vocab"],
        **{t["content"]: t["id"] for t in tokenizer["added_tokens"]},
    }
    return ModelDims(
        spec.hidden_size,
        spec.num_layers,
        spec.intermediate_size,
        spec.num_heads,
        spec.num_kv_heads,
        spec.hidden_size // spec.num_heads,
        len(vocab),
    )
