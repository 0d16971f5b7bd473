"""validate(workflow): check the graph before any backend call.

- every field named exists on the state class (typos get a suggestion);
- every read has a producer before it on every path (a loop may run zero times, a `When` may not run);
- every PendingQueue written is drained by an Await on every path;
- every port a stage needs is configured.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator, Sequence
from typing import Any

from kitchen.engine.errors import GraphError
from kitchen.engine.graph import Await, Loop, Node, When, Workflow
from kitchen.engine.stage import stage_ports
from kitchen.engine.state import available_at_start, field_kind, state_fields


def walk(nodes: Sequence[Node], path: str = "") -> Iterator[tuple[Node, str]]:
    for node in nodes:
        name = getattr(node, "name", type(node).__name__)
        if isinstance(node, When):
            here = f"{path}when" if not path else f"{path}/when"
            yield node, here
            yield from walk(node.body, here)
            yield from walk(node.orelse, here + "/else")
        elif isinstance(node, Loop):
            here = f"{path}/{name}" if path else name
            yield node, here
            yield from walk(node.body, here)
        else:
            yield node, f"{path}/{name}" if path else name


def _names(node: Node) -> tuple[frozenset[str], frozenset[str]]:
    if isinstance(node, Loop):
        return node.reads, frozenset({node.index})
    if isinstance(node, When):
        return node.reads, frozenset()
    return frozenset(getattr(node, "reads", ())), frozenset(getattr(node, "writes", ()))


class _Checker:
    def __init__(self, workflow: Workflow[Any]) -> None:
        self.wf = workflow
        self.errors: list[str] = []
        kinds = {f: field_kind(workflow.state, f) for f in state_fields(workflow.state)}
        self.queues = {f for f, k in kinds.items() if k == "queue"}
        self.producers: dict[str, list[str]] = {}
        for node, _ in walk([*workflow.nodes, *workflow.finally_]):
            if isinstance(node, (Loop, When, Await)):
                continue
            for w in getattr(node, "writes", ()):
                self.producers.setdefault(w, []).append(node.name)

    def error(self, msg: str) -> None:
        if msg not in self.errors:
            self.errors.append(msg)

    def seq(
        self, nodes: Sequence[Node], avail: set[str], outstanding: set[str]
    ) -> tuple[set[str], set[str]]:
        avail, outstanding = set(avail), set(outstanding)
        for node in nodes:
            if isinstance(node, Loop):
                for r in node.reads:
                    self._need(f"loop {node.name}", r, avail)
                body_avail = avail | {node.index}
                a1, o1 = self.seq(node.body, body_avail, outstanding)
                _, o2 = self.seq(node.body, a1, o1)
                outstanding |= o2
            elif isinstance(node, When):
                for r in node.reads:
                    self._need(f"when {node.predicate}", r, avail)
                ab, ob = self.seq(node.body, avail, outstanding)
                ae, oe = self.seq(node.orelse, avail, outstanding)
                avail = ab & ae
                outstanding = ob | oe
            elif isinstance(node, Await):
                if node.field not in self.queues:
                    self.error(
                        f"await {node.field}: field {node.field!r} is not declared PendingQueue on {self.wf.state.__name__}"
                    )
                if node.keep == 0:
                    outstanding.discard(node.field)
                if node.into:
                    avail.add(node.into)
            else:
                for r in sorted(getattr(node, "reads", ())):
                    if r in self.queues:
                        continue  # reading a future is fine; awaiting it is checked separately
                    self._need(f"stage {node.name}", r, avail)
                for w in sorted(getattr(node, "writes", ())):
                    if w in self.queues:
                        outstanding.add(w)
                    avail.add(w)
        return avail, outstanding

    def _need(self, who: str, field: str, avail: set[str]) -> None:
        if field in avail or field not in state_fields(self.wf.state):
            return
        writers = self.producers.get(field)
        hint = (
            f" (written by: {', '.join(sorted(set(writers)))})"
            if writers
            else " (no stage writes it)"
        )
        self.error(f"{who} reads {field!r}, which no earlier stage writes on every path{hint}")


def validate(workflow: Workflow[Any], ports: set[str] | None = None) -> None:
    """Raise GraphError listing every problem, one line each; return None when the graph is sound."""
    fields = state_fields(workflow.state)
    checker = _Checker(workflow)
    for node, path in walk([*workflow.nodes, *workflow.finally_]):
        reads, writes = _names(node)
        for f in sorted(reads | writes):
            if f not in fields:
                close = difflib.get_close_matches(f, sorted(fields), n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                checker.error(f"{path}: field {f!r} is not on {workflow.state.__name__}{hint}")
        if ports is not None:
            for p in sorted(stage_ports(node) - ports):
                checker.error(f"{path}: needs port {p!r}, which is not configured")
    start = available_at_start(workflow.state) | {"step"}
    _avail, outstanding = checker.seq(workflow.nodes, start, set())
    # finally_ may run after a failure anywhere, so it may rely only on what exists at the start.
    _, outstanding = checker.seq(workflow.finally_, start, outstanding)
    for f in sorted(outstanding):
        checker.error(
            f"pending {f!r} is never awaited on some path; add Await({f!r}) after its last write"
        )
    if checker.errors:
        raise GraphError(f"workflow {workflow.name} is invalid:\n  " + "\n  ".join(checker.errors))
