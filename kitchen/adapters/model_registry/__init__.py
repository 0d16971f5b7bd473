"""Model registry: the record a finished run registers, the ModelRegistry port, and its adapters
(SQLite by default; MLflow with the `mlflow` extra, imported only when asked for)."""

from kitchen.adapters.model_registry.redact import config_hash, is_secret_key, redact
from kitchen.adapters.model_registry.resolve import default_registry_path, open_registry
from kitchen.adapters.model_registry.sqlite_store import SQLiteRegistry
from kitchen.ports.model_registry import (
    BaseModelResolution,
    DatasetRef,
    ModelDraft,
    ModelNotFoundError,
    ModelRef,
    ModelRegistry,
    RegisteredModel,
    RegistryError,
    is_registry_ref,
    parse_model_ref,
    resolve_base_model,
)

__all__ = [
    "BaseModelResolution",
    "DatasetRef",
    "ModelDraft",
    "ModelNotFoundError",
    "ModelRef",
    "ModelRegistry",
    "RegisteredModel",
    "RegistryError",
    "SQLiteRegistry",
    "config_hash",
    "default_registry_path",
    "is_registry_ref",
    "is_secret_key",
    "open_registry",
    "parse_model_ref",
    "redact",
    "resolve_base_model",
]
