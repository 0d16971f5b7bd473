"""Lineage: follow parent references from a registered model back to its root."""

from __future__ import annotations

from collections.abc import Callable

from kitchen.ports.model_registry import (
    ModelDraft,
    ModelNotFoundError,
    RegisteredModel,
    RegistryError,
)

GetModel = Callable[[str, int | None], RegisteredModel]


def follow_lineage(get: GetModel, name: str, version: int | None = None) -> list[RegisteredModel]:
    """[model, parent, grandparent, ..., root] using `get(name, version)` for each step.

    Parents are registered before their children, so a chain cannot loop; the seen-set only turns a
    damaged store into a clear error instead of an endless walk.
    """
    chain = [get(name, version)]
    seen = {chain[0].ref}
    while (parent := chain[-1].parent) is not None:
        if parent in seen:
            raise RegistryError(
                f"lineage of {chain[0].ref} loops back to {parent}; the registry store is damaged"
            )
        seen.add(parent)
        chain.append(get(parent.name, parent.version))
    return chain


def missing_parent(draft: ModelDraft, location: str) -> ModelNotFoundError:
    """The error of registering a draft whose parent `location` does not hold."""
    return ModelNotFoundError(
        f"parent model {draft.parent} of {draft.name} is not in model registry {location}; "
        "register it first or drop the parent"
    )
