"""Hand-written small programming problems for the bundled `code` set (in code_problems.json).

Each problem has a statement, a reference solution and test inputs; the expected outputs are
computed by running the reference solution (see code.py), so they are right by construction.
Stdin problems read standard input and print; function problems define `FUNC` from starter code.
The problems are data, so they live in the JSON file next to this one; this module types them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class StdinProblem:
    id: str
    statement: str
    solution: str
    inputs: tuple[str, ...]


@dataclass(frozen=True)
class FunctionProblem:
    id: str
    statement: str
    signature: str  # "add(a: int, b: int) -> int"
    solution: str
    inputs: tuple[tuple[Any, ...], ...]  # positional arguments per test

    @property
    def func_name(self) -> str:
        return self.signature.split("(")[0]


_TABLE = json.loads(Path(__file__).with_name("code_problems.json").read_text(encoding="utf-8"))

STDIN = [
    StdinProblem(p["id"], p["statement"], p["solution"], tuple(p["inputs"]))
    for p in _TABLE["stdin"]
]

FUNCTIONS = [
    FunctionProblem(
        p["id"], p["statement"], p["signature"], p["solution"], tuple(map(tuple, p["inputs"]))
    )
    for p in _TABLE["functions"]
]
