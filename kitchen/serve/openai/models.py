"""What a request's `model` names: a base model, or a sampler checkpoint the server can load.

    kitchen/tiny-llama, smollm2-135m, Org/Model     a base model (LoRA adapters off)
    tinker://<run>/sampler_weights/<name>           a checkpoint this server saved
    /path/to/checkpoint                             a folder the local engine wrote

Each name opens one sampler, kept for the server's life: every request on the same weights then
goes to the same sampler, and so joins the same decode batch.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kitchen.serve.errors import UserError
from kitchen.serve.service import KitchenService


@dataclass
class ServedModel:
    """One `model` name and the sampler serving it."""

    name: str
    sampler: Any  # LocalSamplingClient
    base_model: str
    created: int = field(default_factory=lambda: int(time.time()))
    _renderer: Any = None

    @property
    def tokenizer(self) -> Any:
        return self.sampler.get_tokenizer()

    @property
    def max_context(self) -> int:
        return int(self.sampler.host.max_context)

    def renderer(self) -> Any:
        """The chat format the base model was trained with; the tokenizer's own chat template
        when Kitchen knows no format for it."""
        if self._renderer is None:
            from train_core.renderers import RendererError, get_renderer, resolve_renderer_name

            try:
                name = resolve_renderer_name(self.base_model)
            except RendererError:
                if not getattr(self.tokenizer, "chat_template", None):
                    raise UserError(
                        f"model {self.name!r} has no known chat format and no chat template; "
                        "use /v1/completions"
                    ) from None
                name = "hf_template"
            self._renderer = get_renderer(name, self.tokenizer)
        return self._renderer


class ModelCatalog:
    """The samplers opened for OpenAI requests, by `model` name. Thread-safe."""

    def __init__(self, service: KitchenService) -> None:
        self._service = service
        self._lock = threading.Lock()
        self._models: dict[str, ServedModel] = {}

    def get(self, name: str) -> ServedModel:
        """The model called `name`, opened on first use (may load weights: call off the loop)."""
        with self._lock:
            found = self._models.get(name)
            if found is None:
                found = self._open(name)
                self._models[name] = found
            return found

    def names(self) -> list[str]:
        """Models one can ask for now: the base models in memory and every name opened."""
        loaded = [name for name, _ in self._service.loaded_models()]
        with self._lock:
            opened = list(self._models)
        return list(dict.fromkeys([*loaded, *opened]))

    def _open(self, name: str) -> ServedModel:
        from kitchen.adapters.local.checkpoints import META_FILE
        from kitchen.engine.errors import KitchenError

        is_checkpoint = name.startswith("tinker://") or (Path(name) / META_FILE).is_file()
        try:
            entry = (
                self._service.open_sampler(name, None)
                if is_checkpoint
                else self._service.open_sampler(None, name)
            )
        except KitchenError as e:
            raise UserError(str(e)) from None
        return ServedModel(name, entry.sampler, entry.base_model)
