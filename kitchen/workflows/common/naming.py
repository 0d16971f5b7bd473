"""The name of a stage that can stand more than once in a workflow, derived from its fields."""

from __future__ import annotations

from typing import Any


def name_by_default(stage: Any, name: str) -> None:
    """Give a frozen stage constructed without a `name` the derived `name` (`open_<into>`), so two
    of its kind in one workflow have different names; one given stays. Call it in __post_init__."""
    if not stage.name:
        object.__setattr__(stage, "name", name)
