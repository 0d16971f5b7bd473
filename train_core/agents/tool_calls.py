"""The tool calls a rollout's model made, counted from the replies its client received, for a
gateway that does not count them itself (Kitchen's does, on every route: budgets.py).

The records hold tokens, not what the route parsed from them, so the count is taken on the
client: its `chat.completions.create` is wrapped in place (the same object, so frameworks that
check its type still take it) and each whole reply's `tool_calls` are added up. Streamed replies
and other routes are not counted here.
"""

from __future__ import annotations

from typing import Any


class ToolCallCount:
    """Attach to one rollout's client; `n` is the tool calls of the replies it has received."""

    def __init__(self) -> None:
        self.n = 0

    def attach(self, client: Any) -> Any:
        completions: Any = getattr(getattr(client, "chat", None), "completions", None)
        create = getattr(completions, "create", None)
        if create is None:  # not an OpenAI client: nothing to count
            return client

        async def counted(*args: Any, **kwargs: Any) -> Any:
            reply = await create(*args, **kwargs)
            for choice in getattr(reply, "choices", None) or ():
                message = getattr(choice, "message", None)
                self.n += len(getattr(message, "tool_calls", None) or ())
            return reply

        completions.create = counted
        return client
