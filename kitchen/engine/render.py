"""render(workflow): the plan as text, with each stage's bound options."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from kitchen.engine.graph import Await, Loop, Node, When, Workflow

# phase is how the step clock files a stage's time, not an option the user bound
_SKIP = {"name", "reads", "writes", "ports", "fn", "phase"}


def describe(node: Node) -> str:
    if hasattr(node, "describe") and isinstance(node, (Loop, When, Await)):
        return str(node.describe())
    if dataclasses.is_dataclass(node) and not isinstance(node, type):
        opts = [
            f"{f.name}={_short(getattr(node, f.name))}"
            for f in dataclasses.fields(node)
            if f.name not in _SKIP and f.repr
        ]
        name = getattr(node, "name", type(node).__name__)
        return f"{name}({', '.join(opts)})" if opts else name
    if hasattr(node, "describe"):
        return str(node.describe())
    return str(getattr(node, "name", type(node).__name__))


def _short(value: Any) -> str:
    # a function shows by name: its repr carries a memory address that changes every run
    text = getattr(value, "__qualname__", None) if callable(value) else None
    text = text or repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _io(node: Node) -> str:
    if isinstance(node, (Loop, When)):
        return ""
    reads = ",".join(sorted(getattr(node, "reads", ()))) or "-"
    writes = ",".join(sorted(getattr(node, "writes", ()))) or "-"
    return f"  [{reads} -> {writes}]"


def _lines(nodes: Sequence[Node], prefix: str) -> list[str]:
    out: list[str] = []
    for i, node in enumerate(nodes):
        last = i == len(nodes) - 1
        branch, cont = ("└─ ", "   ") if last else ("├─ ", "│  ")
        out.append(f"{prefix}{branch}{describe(node)}{_io(node)}")
        if isinstance(node, Loop):
            out += _lines(node.body, prefix + cont)
        elif isinstance(node, When):
            out += _lines(node.body, prefix + cont)
            if node.orelse:
                out.append(f"{prefix}{cont}else")
                out += _lines(node.orelse, prefix + cont + "   ")
        elif callable(getattr(node, "plan", None)):  # a stage that runs a whole workflow
            out += _lines(node.plan().nodes, prefix + cont)
    return out


def render(workflow: Workflow[Any]) -> str:
    lines = [f"workflow {workflow.name} (state: {workflow.state.__name__})"]
    lines += _lines(workflow.nodes, "")
    if workflow.finally_:
        lines.append("finally")
        lines += _lines(workflow.finally_, "")
    return "\n".join(lines)
