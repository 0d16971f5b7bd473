"""An env group over one ToolProvider: the group's envs get their tool sets by the provider's
lifetime (one set each, one shared set, or the run's set), and `cleanup` closes the sets this
group made."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from train_core.rl.types import Env, EnvGroupBuilder
from train_core.tool_use.lifetimes import ToolProvider
from train_core.tool_use.types import Tool


@dataclass(eq=False)
class AgentToolGroupBuilder(EnvGroupBuilder):
    """`group_size` envs, each `make_env(tools)` over the tool set the provider hands it."""

    make_env: Callable[[Sequence[Tool]], Env]
    provider: ToolProvider
    group_size: int
    tags: tuple[str, ...] = ()
    _sets: list[list[Tool]] = field(default_factory=list, init=False, repr=False)

    async def make_envs(self) -> Sequence[Env]:
        sets = self.provider.group_sets(self.group_size)
        self._sets.extend(sets)
        return [self.make_env(tools) for tools in sets]

    async def cleanup(self) -> None:
        sets, self._sets = self._sets, []
        await self.provider.release_group(sets)

    def logging_tags(self) -> list[str]:
        return list(self.tags)
