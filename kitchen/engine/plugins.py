"""Plugin tables, by name: recipes, backends, dataset stores, envs, sandboxes, model registries.
Each also reads a Python entry-point group (`kitchen.recipes`, `kitchen.backends`, ...), so
installed packages (cookbook included) add to them without kitchen importing them.

("Registry" in Kitchen is the model registry alone, the store of trained models that
`--registry` names; a table here of its adapters is MODEL_REGISTRIES.)
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterator
from importlib.metadata import entry_points
from typing import Any, Generic, TypeVar

from kitchen.engine.errors import ConfigError

T = TypeVar("T")


class Plugins(Generic[T]):
    """Plugins of one kind by name: added in code (`add`, or `@TABLE.register(name)`) or found
    through the entry-point group on first `get`."""

    def __init__(self, kind: str, group: str | None = None) -> None:
        self.kind = kind
        self.group = group
        self._items: dict[str, T] = {}
        self._entry_points: dict[str, Any] | None = None

    def register(self, name: str) -> Callable[[T], T]:
        def add(obj: T) -> T:
            self.add(name, obj)
            return obj

        return add

    def add(self, name: str, obj: T) -> None:
        if name in self._items and self._items[name] is not obj:
            raise ConfigError(f"{self.kind} {name!r} is registered twice")
        self._items[name] = obj

    def _discover(self) -> dict[str, Any]:
        if self._entry_points is None:
            self._entry_points = {}
            if self.group:
                for ep in entry_points(group=self.group):
                    self._entry_points.setdefault(ep.name, ep)
        return self._entry_points

    def get(self, name: str) -> T:
        if name not in self._items:
            ep = self._discover().get(name)
            if ep is not None:
                loaded = ep.load()
                self._items.setdefault(name, loaded)
        if name not in self._items:
            known = self.names()
            close = difflib.get_close_matches(name, known, n=1)
            hint = (
                f"; did you mean {close[0]!r}?"
                if close
                else f"; known: {', '.join(known) or 'none'}"
            )
            raise ConfigError(f"unknown {self.kind} {name!r}{hint}")
        return self._items[name]

    def names(self) -> list[str]:
        return sorted(set(self._items) | set(self._discover()))

    def __contains__(self, name: str) -> bool:
        return name in self._items or name in self._discover()

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())


RECIPES: Plugins[Any] = Plugins("recipe", "kitchen.recipes")
BACKENDS: Plugins[Callable[..., Any]] = Plugins("backend", "kitchen.backends")
DATASET_STORES: Plugins[Callable[..., Any]] = Plugins("dataset store", "kitchen.dataset_stores")
ENVS: Plugins[Any] = Plugins("env", "kitchen.envs")
SANDBOXES: Plugins[Callable[..., Any]] = Plugins("sandbox", "kitchen.sandboxes")
# name -> (store, source, limit) -> a train_core BenchmarkTask (`kitchen eval --harness benchmark`)
EVAL_TASKS: Plugins[Callable[..., Any]] = Plugins("eval task", "kitchen.eval_tasks")
# name -> () -> an inspect_ai Task (`kitchen eval --harness inspect`)
INSPECT_TASKS: Plugins[Callable[..., Any]] = Plugins("inspect task", "kitchen.inspect_tasks")
MODEL_REGISTRIES: Plugins[Callable[..., Any]] = Plugins(
    "model registry", "kitchen.model_registries"
)
