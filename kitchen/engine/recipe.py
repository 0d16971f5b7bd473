"""A recipe is a pydantic Config plus a workflow factory, and named presets of config values."""

from __future__ import annotations

from typing import Any, ClassVar, Generic, TypeVar

from pydantic import BaseModel

from kitchen.engine.graph import Workflow

C = TypeVar("C", bound=BaseModel)


class Recipe(Generic[C]):
    """Subclass with `Config` set and `workflow(cfg)` defined; register with `RECIPES.register`.

    `presets` maps a preset name (e.g. "cookbook": tinker-cookbook's production values) to config
    overrides applied between the defaults and the user's flags.
    """

    name: ClassVar[str] = ""
    Config: ClassVar[type[BaseModel]]
    presets: ClassVar[dict[str, dict[str, Any]]] = {}

    def workflow(self, cfg: C) -> Workflow[Any]:
        raise NotImplementedError

    @classmethod
    def summary(cls) -> str:
        return (cls.__doc__ or "").strip().splitlines()[0] if cls.__doc__ else ""
