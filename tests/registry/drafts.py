"""Shared record builders for the registry tests."""

from __future__ import annotations

from typing import Any

from kitchen.ports.model_registry import DatasetRef, ModelDraft, ModelRef


def make_draft(name: str = "tuned", parent: ModelRef | None = None, **fields: Any) -> ModelDraft:
    """A realistic draft: a config with a secret, a dataset with a fingerprint, checkpoints."""
    values: dict[str, Any] = {
        "base_model": "kitchen/tiny-llama",
        "recipe": "sl_basic",
        "config": {
            "learning_rate": 1e-4,
            "max_tokens": 64,
            "backend": {"name": "tinker", "api_key": "tml-SECRET-123"},
        },
        "datasets": [DatasetRef(name="bundled:chat", fingerprint="ab12cd", split="train")],
        "state_path": f"/runs/{name}/ckpt/final/state",
        "sampler_path": f"/runs/{name}/ckpt/final/sampler",
        "eval_metrics": {"accuracy": 0.75, "f1": 0.5},
        "log_dir": f"/runs/{name}",
    }
    values.update(fields)
    return ModelDraft(name=name, parent=parent, **values)
