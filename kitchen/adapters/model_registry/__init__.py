"""Model registry adapters of the `kitchen.ports.model_registry` port: SQLite by default; MLflow
with the `mlflow` extra, imported only when asked for."""

from kitchen.adapters.model_registry.record import config_hash
from kitchen.adapters.model_registry.resolve import default_registry_path, open_registry
from kitchen.adapters.model_registry.sqlite_store import SQLiteRegistry

__all__ = ["SQLiteRegistry", "config_hash", "default_registry_path", "open_registry"]
