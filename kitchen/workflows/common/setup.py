"""Stages every training workflow starts with: the training client, and rows from the dataset store."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from kitchen.engine.errors import ConfigError, DataError
from kitchen.engine.stage import Context, Metrics

RowConverter = Callable[[dict[str, Any], str], dict[str, Any] | None]


@runtime_checkable
class GroupingConverter(Protocol):
    """A row converter whose dataset's rows are first grouped into the rows it converts
    (HelpSteer2: a row per response, compared per prompt). `where(i)` locates raw row i."""

    def __call__(self, row: Any, where: str) -> dict[str, Any] | None: ...

    def group(self, rows: Any, where: Callable[[int], str]) -> list[dict[str, Any]]: ...


@dataclass(frozen=True)
class InitTrainingClient:
    """A LoRA training client on the base model, or the one restored from the resume checkpoint
    (weights and optimizer), plus its tokenizer and renderer.

    The renderer is resolved when the workflow is built (the model's recommended one unless
    `renderer_name` is given), so the plan names it and a model without a known chat format is a
    config error on `--dry-run` rather than a failure after the training client opened. A run
    that starts from a checkpoint (resume, or `load_checkpoint_path`) with no renderer given
    renders as the checkpoint's run did (its record's `renderer_name`), so a resumed or continued
    run keeps the chat format its weights learned; a renderer given that differs from the record
    is refused on resume and warned about on load.

    `images`: the run's prompts carry images, so the renderer gets the model's image processor
    from the client (ImageProcessorSource); a model or backend without one is a config error."""

    base_model: str
    lora_rank: int = 32
    renderer_name: str | None = None
    seed: int = 0
    train_mlp: bool = True
    train_attn: bool = True
    train_unembed: bool = True
    load_checkpoint_path: str | None = None
    images: bool = False
    # Whether renderer_name was given, not resolved: None decides it in __post_init__; only a
    # renderer not given yields to a checkpoint's. Not in the plan (the plan names the renderer).
    renderer_given: bool | None = field(default=None, repr=False)
    name: str = "init_training_client"
    reads: frozenset[str] = frozenset()
    writes: frozenset[str] = frozenset({"training_client", "tokenizer", "renderer"})
    ports: frozenset[str] = frozenset({"backend"})

    def __post_init__(self) -> None:
        from train_core.renderers import RendererError, resolve_renderer_name

        if self.renderer_given is None:
            object.__setattr__(self, "renderer_given", self.renderer_name is not None)
        try:
            resolved = resolve_renderer_name(self.base_model, self.renderer_name)
        except RendererError as e:
            raise ConfigError(str(e)) from None
        object.__setattr__(self, "renderer_name", resolved)

    def __call__(self, ctx: Context[Any]) -> Metrics | None:
        from train_core.renderers import get_renderer

        backend = ctx.require_backend()
        assert self.renderer_name is not None  # resolved in __post_init__
        renderer_name = self.renderer_name
        if ctx.resume is not None and ctx.resume.state_path:
            renderer_name = self._renderer_for(ctx, ctx.resume.state_path, resuming=True)
            ctx.logger.info("restoring weights and optimizer from %s", ctx.resume.state_path)
            client = backend.create_training_client_from_state_with_optimizer(ctx.resume.state_path)
        else:
            client = backend.create_lora_training_client(
                self.base_model,
                rank=self.lora_rank,
                seed=self.seed,
                train_mlp=self.train_mlp,
                train_attn=self.train_attn,
                train_unembed=self.train_unembed,
            )
            if self.load_checkpoint_path:
                renderer_name = self._renderer_for(ctx, self.load_checkpoint_path, resuming=False)
                client.load_state(self.load_checkpoint_path).result()
        tokenizer = client.get_tokenizer()
        ctx.state.training_client = client
        ctx.state.tokenizer = tokenizer
        processor = self._image_processor(client, backend.name) if self.images else None
        ctx.state.renderer = get_renderer(renderer_name, tokenizer, image_processor=processor)
        ctx.logger.info("training client on %s (renderer %s)", self.base_model, renderer_name)
        return None

    def _renderer_for(self, ctx: Context[Any], path: str, resuming: bool) -> str:
        """The renderer of a run starting from the checkpoint at `path`: the checkpoint's
        recorded one when none was given; a given one that differs is refused on resume (the run
        would change its chat format mid-way) and warned about on load."""
        from train_core.checkpoint import recorded_renderer
        from train_core.renderers import RendererError, resolve_renderer_name

        assert self.renderer_name is not None  # resolved in __post_init__
        saved = recorded_renderer(path, ctx.log_dir if resuming else None)
        if saved is None or saved == self.renderer_name:
            return self.renderer_name
        if not self.renderer_given:
            try:
                resolve_renderer_name(self.base_model, saved)
            except RendererError as e:
                raise ConfigError(f"checkpoint {path}: {e}; pass --renderer-name NAME") from None
            ctx.logger.info("rendering with %s, as the run that saved %s did", saved, path)
            return saved
        line = (
            f"checkpoint {path} was saved by a run rendering with {saved}; this run renders "
            f"with {self.renderer_name}"
        )
        if resuming:
            raise ConfigError(f"{line}: resume with --renderer-name {saved}, or start a new run")
        ctx.logger.warning("%s (--renderer-name %s renders as it trained)", line, saved)
        return self.renderer_name

    def _image_processor(self, client: Any, backend: str) -> Any:
        from kitchen.ports import ImageProcessorSource

        processor = (
            client.get_image_processor() if isinstance(client, ImageProcessorSource) else None
        )
        if processor is None:
            raise ConfigError(
                f"model {self.base_model} takes no images on the {backend} backend (it has no "
                "image processor); this recipe's prompts carry images: pick a vision-language "
                "model, e.g. --model kitchen/tiny-qwen3-vl"
            )
        return processor


@dataclass(frozen=True)
class LoadDataset:
    """Rows of `source` (bundled:NAME, a local file, a hub name) through `convert(row, where)`, which
    validates a row and returns the item (or None to skip it); stored in `into`. With
    `fingerprint=True` the rows' sha256 goes to `dataset_fingerprints` (for the model registry)."""

    source: str
    into: str
    split: str = "train"
    convert: RowConverter | None = None
    limit: int | None = None
    fingerprint: bool = False
    name: str = "load_dataset"
    ports: frozenset[str] = frozenset({"datasets"})

    @property
    def reads(self) -> frozenset[str]:
        return frozenset({"dataset_fingerprints"} if self.fingerprint else ())

    @property
    def writes(self) -> frozenset[str]:
        return frozenset({self.into} | ({"dataset_fingerprints"} if self.fingerprint else set()))

    def __call__(self, ctx: Context[Any]) -> Metrics | None:
        store = ctx.port("datasets")
        rows = store.load(self.source, self.split)
        where = getattr(rows, "where", lambda i: f"{self.source} ({self.split}) row {i}")
        if isinstance(self.convert, GroupingConverter):
            rows = self.convert.group(rows, where)
            where = lambda i: f"{self.source} ({self.split}) prompt group {i}"  # noqa: E731
        items = []
        for i, row in enumerate(rows):
            item = self.convert(row, where(i)) if self.convert else row
            if item is not None:
                items.append(item)
            if self.limit is not None and len(items) >= self.limit:
                break
        if not items:
            raise DataError(f"dataset {self.source} ({self.split}) has no usable rows")
        setattr(ctx.state, self.into, items)
        if self.fingerprint:
            digest = hashlib.sha256(
                json.dumps(items, sort_keys=True, default=str).encode()
            ).hexdigest()
            key = f"{self.source}:{self.split}"
            ctx.state.dataset_fingerprints = {**ctx.state.dataset_fingerprints, key: digest[:16]}
        ctx.logger.info("loaded %d rows from %s (%s)", len(items), self.source, self.split)
        return None
