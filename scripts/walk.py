"""The walk: the files a reader opens to follow `kitchen run RECIPE` from the command line to the
engine's training call, found by running the command under a profiler, not by hand.

    .venv/bin/python scripts/walk.py dpo          # the files, one a line, and a summary
    .venv/bin/python scripts/walk.py dpo --json   # {"files": [...], "recipe_files": [...], ...}

A repository file (kitchen/, train_core/, cookbook/) is on the walk when it holds

1. a frame on the call stack at one of three moments: when the recipe's Config is validated (the
   config is resolved), when the recipe's `workflow` method is entered (the graph is built), and
   when the local engine's `forward_backward` or `forward_backward_custom` is entered (a training
   call, from the stage that makes it, through the runner; forward_backward is the port's, which
   hands it to the engine's `loss_pass`), and the file of the recipe's class, whose `workflow`
   may be a base class's;
2. a function the recipe's `workflow` method calls directly: the workflow factory it hands the
   config to (`preference(cfg)`), whose file is the graph a reader reads top to bottom;
3. the loss a training call names: the file of the function a `forward_backward_custom` call is
   given (DPO's loss), or of the function the engine runs, beneath its training client, for the
   built-in loss a `forward_backward` call names (`importance_sampling` in train_core/losses.py).

A file on the walk *belongs to the recipe* when a reader reads it for this recipe alone: a file in
cookbook/ (the recipe, the env or dataset it picks), or in the package of the workflow factory rule
2 finds (kitchen/workflows/preference/ for dpo). The rest, the app, the engine, the workflow parts
every paradigm shares, the adapters and train_core, a reader learns once for every recipe.

The walk's second segment follows the training call itself, from `forward_backward` to
`optim_step`, on the engine's compute thread: a file is on it when it holds a frame on the call
stack when the loss a training call names is entered beneath the engine (rule 3's loss) and when
the engine's `optim_step` steps the weights (a `torch.optim` optimizer's `step` is entered
beneath the training client). Its files come out as "segment" (the loss's own file is the
recipe's, as rule 3 finds it).

The recipe runs as its defaults say, on the local engine with a built-in tiny model and one
training step (`--model kitchen/tiny-llama --max-steps 1`): the model and the step count change
which weights load, not which files run. docs/architecture.md lists the walks this prints, and
tests/docs/test_architecture_walk.py fails when the two differ.
"""

from __future__ import annotations

import inspect
import json
import os
import sys
import tempfile
import threading
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]  # reset by trace() to the checkout `kitchen` loads from
PACKAGES = ("kitchen", "train_core", "cookbook")
ENGINE_FILE = "kitchen/adapters/local/clients/training_client.py"
# forward_backward reaches the engine as the port's hook, loss_pass (backward set; forward unset)
TRAINING_CALLS = frozenset({"loss_pass", "forward_backward_custom"})
TRACED_FLAGS = ("--backend", "local", "--model", "kitchen/tiny-llama", "--max-steps", "1")


_paths: dict[str, str | None] = {}  # the hook sees every call: resolve each file name once


def repository_file(filename: str) -> str | None:
    """`filename` relative to the repository when it is one of the three packages' files."""
    if filename not in _paths:
        try:
            rel = Path(filename).resolve().relative_to(ROOT)
            _paths[filename] = rel.as_posix() if rel.parts[0] in PACKAGES else None
        except ValueError:
            _paths[filename] = None
    return _paths[filename]


def _is_recipe_workflow(frame: FrameType) -> bool:
    path = repository_file(frame.f_code.co_filename)
    return frame.f_code.co_name == "workflow" and bool(
        path and path.startswith("cookbook/recipes/")
    )


def _recipe_file(frame: FrameType) -> set[str]:
    """The file of the recipe's own class, whose `workflow` may be a base class's (EnvRL)."""
    path = repository_file(inspect.getfile(type(frame.f_locals["self"])))
    return {path} if path else set()


class Walk:
    """The profiler hook and what it found, by the rule (1-3) that found it."""

    def __init__(self) -> None:
        self.found: dict[str, set[str]] = {"config": set(), "workflow": set(), "engine": set(),
                                           "factory": set(), "loss": set()}  # fmt: skip
        self.segment: set[str] = set()  # forward_backward -> optim_step, on the compute thread
        self.custom_losses: set[Any] = set()  # the code of each custom loss a call was given
        self.training_calls = 0
        self.loss_names: set[str] = set()  # the built-in losses the training calls named

    def _stack(self, frame: FrameType | None) -> set[str]:
        files = set()
        while frame is not None:
            path = repository_file(frame.f_code.co_filename)
            if path:
                files.add(path)
            frame = frame.f_back
        return files

    def _is_config(self, frame: FrameType) -> bool:
        if frame.f_code.co_name not in ("__init__", "model_validate"):
            return False
        if not frame.f_code.co_filename.endswith(os.path.join("pydantic", "main.py")):
            return False
        obj = frame.f_locals.get("self") or frame.f_locals.get("cls")
        cls = obj if isinstance(obj, type) else type(obj)
        names = [c.__name__ for c in cls.__mro__]
        return "TrainConfig" in names[1:]  # a recipe's Config, not TrainConfig itself

    def _beneath_engine(self, frame: FrameType) -> bool:
        caller = frame.f_back
        while caller is not None:
            if repository_file(caller.f_code.co_filename) == ENGINE_FILE:
                return True
            caller = caller.f_back
        return False

    def _training_call(self, frame: FrameType) -> None:
        self.found["engine"] |= self._stack(frame)
        self.training_calls += 1
        request = frame.f_locals.get("request")
        loss_fn = frame.f_locals.get("loss_fn", getattr(request, "loss_fn", None))
        if isinstance(loss_fn, str):  # a built-in loss: the engine's function of that name
            self.loss_names.add(loss_fn)
        elif (code := getattr(loss_fn, "__code__", None)) is not None:  # a custom loss
            path = repository_file(code.co_filename)
            self.found["loss"] |= {path} if path else set()
            self.custom_losses.add(code)

    def _is_segment_moment(self, frame: FrameType, path: str | None) -> bool:
        """A custom loss entered, or the weights stepped, beneath the engine's training client."""
        if frame.f_code in self.custom_losses:
            return self._beneath_engine(frame)
        return path is None and self._is_optimizer_step(frame)

    def _is_optimizer_step(self, frame: FrameType) -> bool:
        """A torch optimizer's `step` (the weights change), beneath the engine's training client."""
        if frame.f_code.co_name != "step" or "torch" not in frame.f_code.co_filename:
            return False
        cls = type(frame.f_locals.get("self"))
        named = any(c.__module__.startswith("torch.optim") for c in cls.__mro__[1:])
        return named and self._beneath_engine(frame)

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        # A trace function sees Python calls only; returning None asks for no line events.
        code = frame.f_code
        path = repository_file(code.co_filename)
        if path == ENGINE_FILE and code.co_name in TRAINING_CALLS and _trains(frame):
            self._training_call(frame)
        elif _is_recipe_workflow(frame):
            self.found["workflow"] |= self._stack(frame) | _recipe_file(frame)
        elif path and frame.f_back is not None and _is_recipe_workflow(frame.f_back):
            self.found["factory"].add(path)
        elif path and code.co_name in self.loss_names and self._beneath_engine(frame):
            self.found["loss"].add(path)
            self.segment |= self._stack(frame)
        elif self._is_segment_moment(frame, path):
            self.segment |= self._stack(frame)
        elif path is None and self._is_config(frame):
            self.found["config"] |= self._stack(frame)

    def files(self) -> list[str]:
        return sorted(set().union(*self.found.values()))


def _trains(frame: FrameType) -> bool:
    """A training call's frame: forward_backward_custom, or loss_pass for a forward_backward."""
    request = frame.f_locals.get("request")
    return frame.f_code.co_name != "loss_pass" or bool(getattr(request, "backward", False))


def run_kitchen(args: list[str], tracer: Any) -> None:
    """`kitchen run ARGS` in this process with `tracer` as the trace function of every thread. The
    run writes only into a temporary directory: its run directory, and a throwaway model registry
    in place of the user's (a run registers its model). A non-zero exit raises."""
    from kitchen.app.cli import main

    with tempfile.TemporaryDirectory() as tmp:
        argv = ["run", *args, "--log-dir", f"{tmp}/run", "--registry", f"{tmp}/registry.db"]
        saved, sys.argv = sys.argv, ["kitchen", *argv]
        sys.settrace(tracer)
        threading.settrace(tracer)
        try:
            main()
        except SystemExit as e:
            if e.code not in (0, None):
                raise RuntimeError(f"kitchen {' '.join(argv)} exited {e.code}") from None
        finally:
            sys.settrace(None)
            threading.settrace(None)  # type: ignore[arg-type]
            sys.argv = saved


def belongs_to_recipe(path: str, factories: set[str]) -> bool:
    """Whether a reader reads `path` for this recipe alone: a cookbook file (the recipe, the env or
    dataset it picks), or a file of the workflow package its workflow factory lives in."""
    packages = {os.path.dirname(f) for f in factories if f.startswith("kitchen/workflows/")}
    return path.startswith("cookbook/") or os.path.dirname(path) in packages


def trace(recipe: str) -> dict[str, Any]:
    """Run `kitchen run RECIPE` with TRACED_FLAGS in this process under a trace function; the walk's
    files, their line and folder counts, and which rule found each file."""
    global ROOT
    import kitchen

    ROOT = Path(kitchen.__file__).resolve().parents[1]  # another checkout's walk: its PYTHONPATH
    walk = Walk()
    run_kitchen([recipe, *TRACED_FLAGS], walk)
    if not walk.training_calls:
        raise RuntimeError(
            f"kitchen run {recipe} never entered forward_backward or forward_backward_custom"
        )
    files = walk.files()
    segment = sorted(walk.segment - walk.found["loss"])
    return {
        "recipe": recipe,
        "files": files,
        "lines": sum(len((ROOT / f).read_text().splitlines()) for f in files),
        "folders": len({os.path.dirname(f) for f in files}),
        "recipe_files": [f for f in files if belongs_to_recipe(f, walk.found["factory"])],
        "found_by": {f: sorted(k for k, v in walk.found.items() if f in v) for f in files},
        "segment": segment,
        "segment_loss": sorted(walk.segment & walk.found["loss"]),
    }


def main() -> None:
    args = sys.argv[1:]
    if not args or args[0].startswith("-"):
        sys.exit("usage: scripts/walk.py RECIPE [--json]")
    result = trace(args[0])
    if "--json" in args:
        print(json.dumps(result))
        return
    for f in result["files"]:
        print(f"{f}  [{', '.join(result['found_by'][f])}]")
    print(f"# {len(result['files'])} files, {result['folders']} folders, {result['lines']} lines; "
          f"{len(result['recipe_files'])} belong to the recipe: {', '.join(result['recipe_files'])}")  # fmt: skip
    print(f"# forward_backward -> optim_step: {', '.join(result['segment'])}, and the loss: "
          f"{', '.join(result['segment_loss'])}")  # fmt: skip


if __name__ == "__main__":
    main()
