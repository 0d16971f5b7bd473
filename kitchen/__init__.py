"""Kitchen: LLM post-training recipes as declarative stage pipelines.

The public API, for writing your own workflows, stages and recipes:

    import kitchen
    from kitchen import Await, Loop, Workflow, stage

    wf = Workflow("mine", MyState, nodes=[LoadThings(), Loop("step", 10, "step_idx", [...])])
    kitchen.validate(wf)                                # the graph is checked before anything runs
    result = kitchen.run_workflow(wf, backend="fake")   # or "local" (default), "tinker"
    result = kitchen.run("sl_basic", {"batch_size": 4}, backend="fake")   # a registered recipe

`import kitchen` stays cheap: it loads the engine core (pydantic, no torch, no tinker); `run`,
`run_workflow`, `RunResult`, `BaseHook`, `BACKENDS` and `DATASET_STORES` load on first use
(module `__getattr__`), since running brings in the tinker SDK's types.
"""

from __future__ import annotations

import importlib
import os
from typing import TYPE_CHECKING, Any

# The light core of the engine, bound eagerly (pydantic; no tinker, no torch).
from kitchen.engine.cores import share_cores
from kitchen.engine.errors import (
    BackendError,
    ConfigError,
    DataError,
    GraphError,
    KitchenError,
    StageError,
)
from kitchen.engine.graph import Await, Every, Loop, When, Workflow
from kitchen.engine.plugins import ENVS, RECIPES
from kitchen.engine.recipe import Recipe
from kitchen.engine.stage import Context, Metrics, Stage, stage
from kitchen.engine.state import BaseState, Handle, PendingQueue
from kitchen.engine.validate import validate
from kitchen.workflows.common.config import TrainConfig
from kitchen.workflows.common.state import TrainState

# Before anything can load torch (nothing above does): its OpenMP runtime (libgomp) reads the wait
# policy once, at load. Idle OpenMP threads spin by default, and two processes spinning on shared
# cores starve each other (two `kitchen run` on 2 cores: steps 20-40x slower, against 2x with
# PASSIVE); alone, the spin is the faster setting. So a process that shares the machine waits
# passively, decided as torch is first imported. docs/adapters.md, "Sharing a machine".
share_cores(os.environ)

if TYPE_CHECKING:
    from kitchen.app.launch import run as run
    from kitchen.app.launch import run_workflow as run_workflow
    from kitchen.engine.plugins import BACKENDS as BACKENDS
    from kitchen.engine.plugins import DATASET_STORES as DATASET_STORES
    from kitchen.engine.runner import BaseHook as BaseHook
    from kitchen.engine.runner import RunResult as RunResult

# Loaded on first use: running brings in the tinker SDK's types (and, with them, torch), and the
# adapter plugin tables list the built-in adapters only once `kitchen.app.builtins` has registered them.
_LAZY: dict[str, tuple[str, str]] = {
    "run": ("kitchen.app.launch", "run"),
    "run_workflow": ("kitchen.app.launch", "run_workflow"),
    "RunResult": ("kitchen.engine.runner", "RunResult"),
    "BaseHook": ("kitchen.engine.runner", "BaseHook"),
    "BACKENDS": ("kitchen.app.builtins", "BACKENDS"),
    "DATASET_STORES": ("kitchen.app.builtins", "DATASET_STORES"),
}

__all__ = [  # noqa: RUF022  (grouped by topic, as the docs present them)
    "Await",
    "Every",
    "Loop",
    "When",
    "Workflow",
    "validate",
    "Context",
    "Metrics",
    "Stage",
    "stage",
    "BaseState",
    "Handle",
    "PendingQueue",
    "TrainState",
    "BaseHook",
    "RunResult",
    "run",
    "run_workflow",
    "BACKENDS",
    "DATASET_STORES",
    "ENVS",
    "RECIPES",
    "Recipe",
    "TrainConfig",
    "BackendError",
    "ConfigError",
    "DataError",
    "GraphError",
    "KitchenError",
    "StageError",
]


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'kitchen' has no attribute {name!r}")
    module_name, attr = _LAZY[name]
    value = getattr(importlib.import_module(module_name), attr)
    globals()[name] = value  # later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
