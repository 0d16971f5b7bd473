"""OpenAI-compatible routes of `kitchen serve`: /v1/models, /v1/completions, /v1/chat/completions,
and /v1/responses and Anthropic's /v1/messages as translations onto chat.

The official `openai` client, eval harnesses (lm-eval's local-completions and
local-chat-completions) and chat UIs talk to a base model or any sampler checkpoint through the
engine's shared decode batch. Requests for the same weights decode together, with each other and
with Tinker-protocol sampling on them.
"""

from kitchen.serve.openai.routes import add_openai_routes

__all__ = ["add_openai_routes"]
