"""OpenAI-compatible routes of `kitchen serve` and the agent gateway: /v1/models, /v1/completions,
/v1/chat/completions, and /v1/responses and Anthropic's /v1/messages as translations onto chat.

The official `openai` client, eval harnesses (lm-eval's local-completions and
local-chat-completions), chat UIs and agents talk to a base model, any sampler checkpoint or the
current policy through the engine's shared decode batch. Requests for the same weights decode
together, with each other and with Tinker-protocol sampling on them.
"""

from __future__ import annotations

from typing import Any

__all__ = ["add_openai_routes"]


def __getattr__(name: str) -> Any:
    # The routes import FastAPI; the request and model types (the gateway's) do not need it.
    if name == "add_openai_routes":
        from kitchen.serve.openai.routes import add_openai_routes

        return add_openai_routes
    raise AttributeError(name)
