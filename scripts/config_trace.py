"""Which files and lines one config value passes through, from the command line to the run.

    .venv/bin/python scripts/config_trace.py                 # kitchen run dpo --dpo-beta 0.2
    .venv/bin/python scripts/config_trace.py rl_basic --temperature 0.7
    .venv/bin/python scripts/config_trace.py dpo --dpo-beta 0.2 --json

Runs `kitchen run RECIPE FLAG VALUE --backend fake --max-steps 1` in this process under a trace
function (walk.run_kitchen, as scripts/walk.py does, in a throwaway run directory and model
registry). A frame of the repository's own code (kitchen/, cookbook/, train_core/) *carries* the
value when, at any line it executes, one of its locals holds it: the command-line word itself
("0.2"), the parsed number, or a dict, list, config model or object (its attributes, three levels
down) containing either. Over the frames that carry it, in two windows: while the value is
resolved (until `resolve_config` returns the run's config, which config.json records) and until
the run starts (the runner's `run`: also the workflow, its validation, the run directory), it
counts the distinct files, the distinct lines those frames executed, the hops (each time the
carrying line that runs next is in another file than the last one: a call into another file or a
return from one) and, per file, how often the value entered it (the stretches of carrying lines in
that file: a value that goes back and forth between two files enters each again and again).
Library frames (typer, pydantic) are not counted, though the value passes through them too.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import FrameType, FunctionType, MethodType, ModuleType
from typing import Any

from walk import run_kitchen

import kitchen

ROOT = Path(kitchen.__file__).resolve().parent.parent  # the checkout on PYTHONPATH
OWN = tuple(str(ROOT / d) + "/" for d in ("kitchen", "cookbook", "train_core"))
RESOLVER = (str(ROOT / "kitchen" / "app" / "resolve.py"), "resolve_config")
RUNNER = str(ROOT / "kitchen" / "engine" / "runner.py")


def holds(value: Any, words: tuple[str, float | None], depth: int = 3) -> bool:
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


class Tracer:
    def __init__(self, words: tuple[str, float | None]) -> None:
        self.words = words
        self.lines: dict[int, set[tuple[str, int]]] = {}  # frame id -> lines it ran
        self.carrying: set[int] = set()
        self.carried_lines: set[tuple[str, int]] = set()  # lines run by carrying frames
        self.order: list[str] = []  # the files carrying lines ran in, each change of file once
        self.stopped = False
        # the carrying files in order and the carried lines, when resolve_config returns
        self.resolved: tuple[list[str], set[tuple[str, int]]] | None = None

    def global_trace(self, frame: FrameType, event: str, arg: Any) -> Any:
        if self.stopped:
            return None
        path = frame.f_code.co_filename
        if frame.f_code.co_name == "run" and path == RUNNER:  # the run starts
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
            if self.resolved is None and (path, frame.f_code.co_name) == RESOLVER:
                self.resolved = (list(self.order), set(self.carried_lines))
            self.carrying.discard(key)
            self.lines.pop(key, None)
        return self.local_trace


def number(word: str) -> float | None:
    try:
        return float(word)
    except ValueError:
        return None


def trace(recipe: str, flag: str, word: str) -> dict[str, Any]:
    """`kitchen run RECIPE FLAG WORD` traced: the two windows' counts (see the module's doc)."""
    tracer = Tracer((word, number(word)))
    run_kitchen([recipe, flag, word, "--backend", "fake", "--max-steps", "1", "--no-progress"],
                tracer.global_trace)  # fmt: skip
    if tracer.resolved is None:
        raise RuntimeError(f"kitchen run {recipe}: resolve_config never returned")
    return {
        "command": f"kitchen run {recipe} {flag} {word}",
        "resolved": counts(*tracer.resolved),
        "until_run": counts(tracer.order, tracer.carried_lines),
    }


def counts(order: list[str], lines: set[tuple[str, int]]) -> dict[str, Any]:
    """Files (with the lines run in each), folders, lines, hops and entries of a carrying `order`."""
    rel = [Path(f).relative_to(ROOT).as_posix() for f in order]
    files = sorted(set(rel))
    return {
        "path": rel,
        "files": {f: sum(1 for p, _ in lines if p == str(ROOT / f)) for f in files},
        "folders": len({Path(f).parent for f in files}),
        "lines": len(lines),
        "hops": max(len(order) - 1, 0),
        "entered": {f: rel.count(f) for f in files},
    }


def main(argv: list[str]) -> None:
    as_json = "--json" in argv
    argv = [a for a in argv if a != "--json"]
    recipe, flag, word = (argv + ["dpo", "--dpo-beta", "0.2"][len(argv) :])[:3]
    result = trace(recipe, flag, word)
    if as_json:
        print(json.dumps(result))
        return
    print(result["command"])
    summary("while the value is resolved (until resolve_config returns)", result["resolved"])
    print("    " + " -> ".join(f.removesuffix(".py") for f in result["resolved"]["path"]))
    summary("until the run starts (also the workflow, its validation, the run directory)",
            result["until_run"])  # fmt: skip


def summary(what: str, window: dict[str, Any]) -> None:
    entered = max(window["entered"].values(), default=0)
    print(f"  {what}: {len(window['files'])} files in {window['folders']} folders, "
          f"{window['lines']} lines run, {window['hops']} hops between files, "
          f"no file entered more than {entered}x")  # fmt: skip
    for f, n in window["files"].items():
        print(f"    {f}: {n} lines, entered {window['entered'][f]}x")


if __name__ == "__main__":
    main(sys.argv[1:])
