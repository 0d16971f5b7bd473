"""Register the finished model: name, version, base model, recipe, config, datasets, checkpoint
paths, final eval metrics and the parent it started from (lineage)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kitchen.engine.stage import Context, Metrics


def _dataset_ref(key: str, fingerprint: str) -> Any:
    from kitchen.ports.model_registry import DatasetRef

    source, _, split = key.rpartition(":")
    return DatasetRef(name=source, fingerprint=fingerprint, split=split or None)


@dataclass(frozen=True, kw_only=True)
class RegisterModel:
    model_name: str  # the registered name; versions auto-increment per name
    base_model: str
    recipe: str
    config: dict[str, Any] = field(default_factory=dict, repr=False)
    parent: str | None = None  # NAME:VERSION this run started from
    name: str = "register_model"
    reads: frozenset[str] = frozenset({"final_paths", "eval_results", "dataset_fingerprints"})
    writes: frozenset[str] = frozenset({"registered_model"})
    ports: frozenset[str] = frozenset({"registry"})

    def __call__(self, ctx: Context[Any]) -> Metrics | None:
        from kitchen.ports.model_registry import ModelDraft, ModelRef, parse_model_ref

        parent = None
        if self.parent:
            name, version = parse_model_ref(self.parent)
            parent = ModelRef(name=name, version=version or 1)
        paths = ctx.state.final_paths or {}
        draft = ModelDraft(
            name=self.model_name,
            base_model=self.base_model,
            recipe=self.recipe,
            config=self.config,
            datasets=[_dataset_ref(k, v) for k, v in ctx.state.dataset_fingerprints.items()],
            state_path=paths.get("state_path"),
            sampler_path=paths.get("sampler_path"),
            eval_metrics={k: float(v) for k, v in ctx.state.eval_results.items()},
            parent=parent,
            # absolute: the registry is shared by every clone on the machine
            log_dir=str(Path(ctx.log_dir).resolve()) if ctx.log_dir else None,
        )
        record = ctx.port("registry").register(draft)
        ctx.state.registered_model = {
            "id": record.id,
            "name": record.name,
            "version": record.version,
        }
        ctx.logger.info("registered %s:%s", record.name, record.version)
        return None
