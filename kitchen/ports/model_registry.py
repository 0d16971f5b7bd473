"""The model-registry port: the record a finished run registers, its errors, and the Protocol the
SQLite (default) and MLflow adapters implement.
"""

from __future__ import annotations

import builtins
import re
from typing import Any, NamedTuple, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, field_validator

from kitchen.engine.errors import ConfigError, KitchenError

# A name is one path-safe token: it appears in `NAME:VERSION` refs and in MLflow filter strings.
MODEL_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$"
_NAME_RE = re.compile(MODEL_NAME_PATTERN)


class RegistryError(KitchenError):
    """The registry store itself failed: a locked, corrupted or unreachable database (exit 1)."""


class ModelNotFoundError(ConfigError):
    """A `NAME[:VERSION]` the user gave names no registered model (exit 2)."""


def check_model_name(name: str) -> str:
    """The name unchanged, or a ConfigError saying what a model name may contain."""
    if not _NAME_RE.match(name):
        raise ConfigError(
            f"model name {name!r} is not valid; expected letters, digits, '.', '_' or '-' "
            "(starting with a letter or digit, at most 200 characters)"
        )
    return name


class ModelRef(BaseModel):
    """A reference to one registered model version, written `NAME:VERSION`."""

    model_config = ConfigDict(frozen=True)

    name: str = Field(description="registered model name")
    version: int = Field(ge=1, description="version within that name, from 1")

    def __str__(self) -> str:
        return f"{self.name}:{self.version}"


def parse_model_ref(text: str) -> tuple[str, int | None]:
    """`NAME` or `NAME:VERSION` -> (name, version or None for the latest)."""
    name, sep, version_text = text.strip().partition(":")
    check_model_name(name)
    if not sep:
        return name, None
    if not version_text.isdigit() or int(version_text) < 1:
        raise ConfigError(
            f"model reference {text!r}: version {version_text!r} is not a positive integer; "
            "expected NAME or NAME:VERSION (e.g. my-model:3)"
        )
    return name, int(version_text)


class DatasetRef(BaseModel):
    """A dataset a run trained or evaluated on, with a fingerprint of its content when known."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(description="dataset name or path as the run was given it")
    fingerprint: str | None = Field(None, description="content hash of the rows used, if known")
    split: str | None = Field(None, description="split used (train, test, ...), if any")


class ModelDraft(BaseModel):
    """What a finished run submits to `ModelRegistry.register`. The registry redacts the config,
    hashes it, and assigns id, version and created_at."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="registered model name; versions auto-increment per name")
    base_model: str = Field(description="the model the run started from (HF name, path, tiny-*)")
    recipe: str = Field(description="recipe name, e.g. sl_basic")
    config: dict[str, Any] = Field(
        default_factory=dict, description="the run's config (secrets are redacted on register)"
    )
    datasets: list[DatasetRef] = Field(default_factory=list, description="datasets used")
    state_path: str | None = Field(None, description="final training-state checkpoint path")
    sampler_path: str | None = Field(None, description="final sampler-weights checkpoint path")
    eval_metrics: dict[str, float] = Field(default_factory=dict, description="final eval metrics")
    parent: ModelRef | None = Field(
        None, description="the registered model this run started from (lineage), if any"
    )
    log_dir: str | None = Field(None, description="the run directory, if any")

    @field_validator("name")
    @classmethod
    def _valid_name(cls, name: str) -> str:
        if not _NAME_RE.match(name):
            raise ValueError(f"expected letters, digits, '.', '_' or '-', got {name!r}")
        return name


class RegisteredModel(ModelDraft):
    """One registered model version, as stored and returned by the registry."""

    id: str = Field(description="unique id of this record (uuid4 hex)")
    version: int = Field(ge=1, description="version within `name`, auto-incremented from 1")
    config_hash: str = Field(description="sha256 of the redacted config's canonical JSON")
    created_at: str = Field(description="registration time, ISO 8601 UTC")

    @property
    def ref(self) -> ModelRef:
        return ModelRef(name=self.name, version=self.version)


@runtime_checkable
class ModelRegistry(Protocol):
    """Where finished runs register their models. `location` names the store in messages."""

    location: str

    def register(self, draft: ModelDraft) -> RegisteredModel:
        """Store a new version of `draft.name` atomically (version = last version + 1). Raises
        ModelNotFoundError if `draft.parent` is not registered, RegistryError if the store fails."""
        ...

    def get(self, name: str, version: int | None = None) -> RegisteredModel:
        """One version (None: the latest); ModelNotFoundError if there is none."""
        ...

    def list(self, name: str | None = None) -> builtins.list[RegisteredModel]:
        """Every record (or every version of `name`), ordered by name then version."""
        ...

    def lineage(self, name: str, version: int | None = None) -> builtins.list[RegisteredModel]:
        """The model, then its parent, ... back to the root (the first has no parent)."""
        ...


REGISTRY_PREFIX = "registry:"


def is_registry_ref(base_model: str) -> bool:
    """Whether a `--base-model` value points into the registry (`registry:NAME[:VERSION]`)."""
    return base_model.startswith(REGISTRY_PREFIX)


class BaseModelResolution(NamedTuple):
    """What a run needs to start from a registered model."""

    base_model: str  # the root model the registered weights sit on (pass to the backend)
    checkpoint_path: str  # the record's state_path if it has one, else its sampler_path
    parent: ModelRef  # pinned NAME:VERSION, stored as the new record's parent (lineage)


def resolve_base_model(base_model: str, registry: ModelRegistry) -> BaseModelResolution:
    """`registry:NAME:VERSION` (or `registry:NAME` for the latest) -> (base model, checkpoint
    path, parent ref). The version is pinned in `parent` even when the latest was asked for."""
    if not is_registry_ref(base_model):
        raise ConfigError(
            f"--base-model {base_model!r} is not a registry reference; expected "
            "registry:NAME:VERSION (e.g. registry:my-model:2)"
        )
    name, version = parse_model_ref(base_model.removeprefix(REGISTRY_PREFIX))
    record = registry.get(name, version)
    checkpoint = record.state_path or record.sampler_path
    if not checkpoint:
        raise ConfigError(
            f"--base-model {base_model}: registered model {record.ref} in {registry.location} "
            "has no state_path or sampler_path to start from; pick a version saved with a checkpoint"
        )
    return BaseModelResolution(record.base_model, checkpoint, record.ref)
