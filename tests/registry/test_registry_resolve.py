"""Where the registry lives, and starting a run from `registry:NAME:VERSION`."""

from __future__ import annotations

from pathlib import Path

import pytest

from kitchen.adapters.model_registry import SQLiteRegistry, default_registry_path, open_registry
from kitchen.engine.errors import ConfigError
from kitchen.ports.model_registry import (
    ModelNotFoundError,
    ModelRef,
    is_registry_ref,
    resolve_base_model,
)
from tests.registry.drafts import make_draft


def test_registry_path_comes_from_env_then_xdg_data_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KITCHEN_REGISTRY", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert default_registry_path() == tmp_path / "xdg" / "kitchen" / "registry.db"
    monkeypatch.delenv("XDG_DATA_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_registry_path() == tmp_path / "home" / ".local/share/kitchen/registry.db"
    monkeypatch.setenv("KITCHEN_REGISTRY", str(tmp_path / "env.db"))
    assert default_registry_path() == tmp_path / "env.db"
    opened = open_registry()
    assert isinstance(opened, SQLiteRegistry) and opened.path == tmp_path / "env.db"
    explicit = open_registry(tmp_path / "flag.db")
    assert isinstance(explicit, SQLiteRegistry) and explicit.path == tmp_path / "flag.db"


def test_resolve_base_model_gives_root_model_checkpoint_and_pinned_parent(tmp_path: Path) -> None:
    registry = SQLiteRegistry(tmp_path / "r.db")
    registry.register(make_draft("sft"))
    registry.register(make_draft("sft", state_path=None))  # sampler weights only
    assert is_registry_ref("registry:sft:1") and not is_registry_ref("Qwen/Qwen3-8B")
    base, checkpoint, parent = resolve_base_model("registry:sft:1", registry)
    assert (base, checkpoint, parent) == (
        "kitchen/tiny-llama",
        "/runs/sft/ckpt/final/state",
        ModelRef(name="sft", version=1),
    )
    latest = resolve_base_model("registry:sft", registry)
    assert latest.checkpoint_path == "/runs/sft/ckpt/final/sampler"
    assert latest.parent == ModelRef(name="sft", version=2)


def test_resolve_base_model_errors_are_usage_errors(tmp_path: Path) -> None:
    registry = SQLiteRegistry(tmp_path / "r.db")
    registry.register(make_draft("bare", state_path=None, sampler_path=None))
    with pytest.raises(ConfigError, match="has no state_path or sampler_path"):
        resolve_base_model("registry:bare:1", registry)
    with pytest.raises(ModelNotFoundError):
        resolve_base_model("registry:missing:1", registry)
    with pytest.raises(ConfigError, match="not a registry reference"):
        resolve_base_model("Qwen/Qwen3-8B", registry)
    with pytest.raises(ConfigError, match="not a positive integer"):
        resolve_base_model("registry:bare:latest", registry)
