"""Tokenizers and image processors for service-side models.

The SDK loads `tokenizer_id` (or the model name) with transformers, which needs the Hugging Face
hub or its cache. Kitchen's own names (`kitchen/tiny-*`, `smollm2-135m`, local folders) resolve
without the hub, so they are the fallback: a run against `kitchen serve` works offline. An image
processor is found the same way (tinker-cookbook loads it by model name with AutoImageProcessor).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from kitchen.engine.errors import BackendError

_cache: dict[str, Any] = {}
_lock = threading.Lock()


def load_tokenizer(model_name: str, tokenizer_id: str | None, sdk_loader: Callable[[], Any]) -> Any:
    """The SDK's tokenizer for the model, else the one kitchen resolves for `model_name`."""
    key = f"{model_name}|{tokenizer_id}"
    with _lock:
        if key in _cache:
            return _cache[key]
    try:
        tokenizer = sdk_loader()
    except Exception as first:
        tokenizer = _kitchen_tokenizer(model_name, first)
    with _lock:
        _cache[key] = tokenizer
    return tokenizer


def _kitchen_tokenizer(model_name: str, first: Exception) -> Any:
    try:
        from transformers import AutoTokenizer

        from kitchen.adapters.local import resolve_model

        return AutoTokenizer.from_pretrained(str(resolve_model(model_name)))
    except Exception as e:
        raise BackendError(
            f"tinker: no tokenizer for {model_name!r}: the SDK failed ({type(first).__name__}: "
            f"{first}) and kitchen could not resolve it locally ({e})"
        ) from e


_processors: dict[str, Any] = {}


def load_image_processor(model_name: str) -> Any:
    """The image processor saved with `model_name` (by hub name, else the folder kitchen resolves
    it to); None when neither has one (a text-only model)."""
    with _lock:
        if model_name in _processors:
            return _processors[model_name]
    from transformers import AutoImageProcessor

    from kitchen.adapters.local import resolve_model

    processor = None
    for source in (model_name, lambda: str(resolve_model(model_name))):
        try:
            processor = AutoImageProcessor.from_pretrained(source() if callable(source) else source)
            break
        except Exception:  # not on the hub or in its cache, not a kitchen name, or no processor
            continue
    with _lock:
        _processors[model_name] = processor
    return processor
