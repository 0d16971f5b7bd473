"""A recipe is a pydantic Config plus a workflow factory, and named presets of config values."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar, Generic, TypeVar, get_args

from pydantic import BaseModel

from kitchen.engine.graph import Workflow

C = TypeVar("C", bound=BaseModel)


class Recipe(Generic[C]):
    """Subclass as `Recipe[MyConfig]` with `name` set and `workflow(cfg)` defined; register with
    `RECIPES.register` or a `kitchen.recipes` entry point.

    `Config` is the type argument (`MyConfig`) unless the class sets it. `presets` maps a preset
    name (e.g. "cookbook": tinker-cookbook's production values) to config overrides applied
    between the defaults and the user's flags; unless the class sets them, they are read from
    `presets/NAME.yaml` beside the recipe's module, where there is one: values copied from
    upstream configs are data, kept one file per recipe (as torchtune keeps its configs).
    """

    name: ClassVar[str] = ""
    Config: ClassVar[type[BaseModel]]
    presets: ClassVar[dict[str, dict[str, Any]]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "Config" not in vars(cls):
            for base in vars(cls).get("__orig_bases__", ()):
                for arg in get_args(base):
                    if isinstance(arg, type) and issubclass(arg, BaseModel):
                        cls.Config = arg
        path = presets_path(cls)
        if "presets" not in vars(cls) and path is not None and path.exists():
            cls.presets = load_presets(path)

    def bind(self, cfg: C) -> C:
        """`cfg` with the values the recipe decides from it (a dataset's short name -> the source
        and held-out split it loads). The config resolution applies it once, as it builds the
        config, so config.json, the workflow and the model registry's record hold the same
        values; `workflow(cfg)` changes nothing. Binding a bound config gives it back unchanged
        (a run resumed from its config.json). A function of the config alone may stand in for
        the method (`bind = DatasetBinding("chat")`, cookbook/recipes/dataset_splits.py)."""
        return cfg

    def workflow(self, cfg: C) -> Workflow[Any]:
        raise NotImplementedError

    @classmethod
    def summary(cls) -> str:
        return (cls.__doc__ or "").strip().splitlines()[0] if cls.__doc__ else ""


def binding(recipe: Recipe[Any]) -> Callable[[Any], Any] | None:
    """The recipe's `bind`, or None where it decides nothing (Recipe.bind, the identity)."""
    return None if type(recipe).bind is Recipe.bind else recipe.bind


def presets_path(recipe: type[Recipe[Any]]) -> Path | None:
    """Where a recipe's presets file belongs: presets/NAME.yaml beside its module."""
    module_file = getattr(sys.modules.get(recipe.__module__), "__file__", None)
    if not recipe.name or module_file is None:
        return None
    return Path(module_file).parent / "presets" / f"{recipe.name}.yaml"


def load_presets(path: Path) -> dict[str, dict[str, Any]]:
    """A presets file: preset name -> config values (flat or dotted names)."""
    import yaml  # only recipes with a presets file need it

    presets = yaml.safe_load(path.read_text())
    if not isinstance(presets, dict) or not all(isinstance(v, dict) for v in presets.values()):
        raise ValueError(f"{path}: expected a mapping of preset name -> mapping of config values")
    return presets
