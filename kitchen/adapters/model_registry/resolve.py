"""Where the registry is (`--registry`, KITCHEN_REGISTRY, the user data dir) and which adapter
opens it."""

from __future__ import annotations

import os
from pathlib import Path

from kitchen.ports.model_registry import ModelRegistry

ENV_VAR = "KITCHEN_REGISTRY"
MLFLOW_PREFIX = "mlflow:"


def default_registry_path() -> Path:
    """$KITCHEN_REGISTRY, else $XDG_DATA_HOME/kitchen/registry.db (~/.local/share by default)."""
    if env := os.environ.get(ENV_VAR):
        return Path(env).expanduser()
    data_home = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data_home).expanduser() / "kitchen" / "registry.db"


def open_registry(spec: str | Path | None = None, timeout: float = 10.0) -> ModelRegistry:
    """The registry named by `spec` (a `--registry` value), else by KITCHEN_REGISTRY, else the
    default SQLite file. `mlflow:TRACKING_URI` (e.g. `mlflow:sqlite:///mlflow.db`,
    `mlflow:http://host:5000`) selects the MLflow adapter; anything else is a SQLite file path."""
    text = str(spec) if spec is not None else str(default_registry_path())
    if text.startswith(MLFLOW_PREFIX):
        from kitchen.adapters.model_registry.mlflow_store import MLflowRegistry

        return MLflowRegistry(text.removeprefix(MLFLOW_PREFIX))
    from kitchen.adapters.model_registry.sqlite_store import SQLiteRegistry

    return SQLiteRegistry(text, timeout=timeout)
