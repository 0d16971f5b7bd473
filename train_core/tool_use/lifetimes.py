"""How long a tool's state lives: one episode, one group (the envs of one prompt share it, e.g.
one sandbox or one search index per group), or the whole run. A ToolProvider makes the tools;
`tools_for` hands out the instances of the asked scope, and `close` releases those it made for
that scope (a tool with an `aclose` coroutine is closed; a run tool lives until the process
ends or `close_run` is awaited)."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from train_core.tool_use.types import Tool

Lifetime = Literal["episode", "group", "run"]
LIFETIMES: tuple[Lifetime, ...] = ("episode", "group", "run")


async def close_tools(tools: Sequence[Tool]) -> None:
    """Await `aclose()` once on each tool, or on the object a @tool method is bound to, where it
    has one; never raises (cleanup must not hide the rollout's own error)."""
    holders = {id(h): h for t in tools for h in (t, getattr(t, "owner", None)) if h is not None}
    for holder in holders.values():
        close = getattr(holder, "aclose", None)
        if close is None:
            continue
        try:
            out = close()
            if inspect.isawaitable(out):
                await out
        except Exception:  # see the docstring
            pass


@dataclass
class ToolProvider:
    """`make()` builds a fresh set of tools; `lifetime` says how widely one set is shared."""

    make: Callable[[], Sequence[Tool]]
    lifetime: Lifetime = "episode"
    _run_tools: list[Tool] | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.lifetime not in LIFETIMES:
            raise ValueError(f"tool lifetime {self.lifetime!r}; expected one of {LIFETIMES}")

    def run_tools(self) -> list[Tool]:
        if self._run_tools is None:
            self._run_tools = list(self.make())
        return self._run_tools

    def group_sets(self, group_size: int) -> list[list[Tool]]:
        """The tool set of each env of one group: one shared set (group, run) or one each."""
        if self.lifetime == "run":
            return [self.run_tools()] * group_size
        if self.lifetime == "group":
            return [list(self.make())] * group_size
        return [list(self.make()) for _ in range(group_size)]

    async def release_group(self, sets: Sequence[Sequence[Tool]]) -> None:
        """Close what `group_sets` made for one group (run tools stay)."""
        if self.lifetime == "run":
            return
        unique = {id(s): s for s in sets}.values()
        for tools in unique:
            await close_tools(tools)

    async def close_run(self) -> None:
        if self._run_tools is not None:
            await close_tools(self._run_tools)
            self._run_tools = None
