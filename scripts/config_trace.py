"""Which files and lines one config value passes through, from the command line to the run.

    .venv/bin/python scripts/config_trace.py                 # kitchen run dpo --dpo-beta 0.2
    .venv/bin/python scripts/config_trace.py rl_basic --temperature 0.7

Runs `kitchen run RECIPE FLAG VALUE --backend fake --max-steps 1` in this process under a trace
function (walk.run_kitchen, as scripts/walk.py does). A frame of the repository's own code (kitchen/, cookbook/, train_core/) *carries* the
value when, at any line it executes, one of its locals holds it: the command-line word itself
("0.2"), the parsed float, or a dict, list, config model or object (its attributes, three levels
down) containing either. Counted over the frames that carry it, up to the first step of the run
(the runner's `run`): the distinct files, the distinct lines those frames executed, and
the hops (each time the carrying line that runs next is in another file than the last one: a
call into another file or a return from one). Library frames (typer,
pydantic) are not counted, though the value passes through them too.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from types import FrameType, FunctionType, MethodType, ModuleType
from typing import Any

from walk import run_kitchen

import kitchen

ROOT = Path(kitchen.__file__).resolve().parent.parent  # the checkout on PYTHONPATH
OWN = tuple(str(ROOT / d) + "/" for d in ("kitchen", "cookbook", "train_core"))


def holds(value: Any, words: tuple[str, float], depth: int = 3) -> bool:
    """Whether `value` is, or contains within `depth` levels, the traced word or number."""
    if isinstance(value, bool):
        return False
    if isinstance(value, str):
        return value == words[0]
    if isinstance(value, float):
        return value == words[1]
    if depth == 0 or isinstance(value, (int, bytes, type, ModuleType, FunctionType, MethodType)):
        return False
    if isinstance(value, dict):
        return any(holds(v, words, depth - 1) for v in list(value.values())[:200])
    if isinstance(value, (list, tuple, set, frozenset)):
        return any(holds(v, words, depth - 1) for v in list(value)[:200])
    fields = getattr(value, "__dict__", None)
    if isinstance(fields, dict):
        return any(holds(v, words, depth - 1) for v in list(fields.values())[:200])
    return False


def is_recipe(frame: FrameType) -> bool:
    from kitchen.engine.recipe import Recipe

    return isinstance(frame.f_locals.get("self"), Recipe)


class Tracer:
    def __init__(self, words: tuple[str, float]) -> None:
        self.words = words
        self.lines: dict[int, set[tuple[str, int]]] = {}  # frame id -> lines it ran
        self.carrying: set[int] = set()
        self.carried_lines: set[tuple[str, int]] = set()  # lines run by carrying frames
        self.order: list[str] = []  # the files carrying lines ran in, each change of file once
        self.stopped = False
        # the carrying calls and lines so far, when the recipe starts building its workflow
        self.resolved: tuple[list[str], set[tuple[str, int]]] | None = None

    def global_trace(self, frame: FrameType, event: str, arg: Any) -> Any:
        if self.stopped:
            return None
        path = frame.f_code.co_filename
        if (
            self.resolved is None
            and event == "call"
            and frame.f_code.co_name == "workflow"
            and is_recipe(frame)
        ):
            self.resolved = (list(self.order), set(self.carried_lines))
        if frame.f_code.co_name == "run" and path.endswith("engine/runner.py"):  # the run starts
            self.stopped = True
            return None
        own = path.startswith(OWN) and frame.f_code.co_name != "<module>"  # not an import
        return self.local_trace if own else None

    def local_trace(self, frame: FrameType, event: str, arg: Any) -> Any:
        if self.stopped:
            return None
        key = id(frame)
        path = frame.f_code.co_filename
        self.lines.setdefault(key, set()).add((path, frame.f_lineno))
        if key not in self.carrying and any(holds(v, self.words) for v in frame.f_locals.values()):
            self.carrying.add(key)
            self.carried_lines.update(self.lines[key])
        if key in self.carrying:
            self.carried_lines.add((path, frame.f_lineno))
            if not self.order or self.order[-1] != path:
                self.order.append(path)
        if event == "return":  # a later frame may get the same id
            self.carrying.discard(key)
            self.lines.pop(key, None)
        return self.local_trace


def main(argv: list[str]) -> None:
    recipe, flag, word = (argv + ["dpo", "--dpo-beta", "0.2"][len(argv) :])[:3]
    tracer = Tracer((word, float(word)))
    with tempfile.TemporaryDirectory() as tmp:
        run_kitchen(["run", recipe, flag, word, "--backend", "fake", "--max-steps", "1",
                     "--log-dir", f"{tmp}/run", "--no-progress"], tracer.global_trace)  # fmt: skip
    assert tracer.resolved is not None, "the recipe's workflow factory was never called"
    order, lines = tracer.resolved
    print(f"kitchen run {recipe} {flag} {word}")
    summary("until the recipe builds its workflow (config resolution)", order, lines)
    print("    " + " -> ".join(Path(p).stem for p in order))
    summary("until the run starts (also the plan, validation, run directory)", tracer.order,
            tracer.carried_lines)  # fmt: skip


def summary(what: str, order: list[str], lines: set[tuple[str, int]]) -> None:
    """Files, folders, lines run and hops of the carrying calls in `order`."""
    files = sorted(set(order))
    hops = len(order) - 1
    folders = {Path(f).parent for f in files}
    print(f"  {what}: {len(files)} files in {len(folders)} folders, {len(lines)} lines run, "
          f"{hops} hops between files")  # fmt: skip
    for f in files:
        n = sum(1 for p, _ in lines if p == f)
        print(f"    {Path(f).relative_to(ROOT)}: {n} lines")


if __name__ == "__main__":
    main(sys.argv[1:])
