"""A model's shapes without loading it, for the dry run's LoRA parameter count: the table of known
models, a built-in tiny model's spec, a local folder's config.json, or the config.json in the local
Hugging Face cache. Nothing is downloaded."""

from __future__ import annotations

import json
from pathlib import Path

from train_core.hyperparams import KNOWN_DIMS, ModelDims


def model_dims(model_name: str) -> ModelDims | None:
    """The shapes of `model_name`, or None when no config of it is at hand offline."""
    base = model_name.split(":", 1)[0]  # Tinker variant suffixes such as ":peft:262144"
    if base in KNOWN_DIMS:
        return KNOWN_DIMS[base]
    if base.lower().startswith("kitchen/"):
        return _tiny_dims(base.lower())
    folder = Path(base).expanduser()
    if (folder / "config.json").is_file():
        return _read(folder / "config.json")
    if base.count("/") == 1:
        from huggingface_hub import try_to_load_from_cache

        cached = try_to_load_from_cache(base, "config.json")
        if isinstance(cached, str):
            return _read(Path(cached))
    return None


def _read(path: Path) -> ModelDims | None:
    try:
        return ModelDims.from_config(json.loads(path.read_text()))
    except (ValueError, OSError):
        return None  # not a dense decoder we can count; the plan says "unknown"


def _tiny_dims(name: str) -> ModelDims | None:
    from kitchen.adapters.local.tiny import TINY_MODELS, tiny_vocabulary

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
