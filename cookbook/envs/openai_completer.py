"""A message completer on any OpenAI-compatible chat completions endpoint (`kitchen serve`,
vLLM, a hosted API), through the official `openai` client: rubric's grader when it runs outside
the run's backend. A call that fails or runs past `timeout_s` raises, and the caller's policy
counts it (RubricGrader: retried, then a failed item; never a crashed step); the client itself
never retries, so the retries counted are the caller's.

The API key is read from the environment variable `api_key_env` names, when the completer is
made. It is handed to the client and kept nowhere else: not in a field's repr, not in a config,
not in a log line.
"""

from __future__ import annotations

import asyncio
import os
import weakref
from dataclasses import dataclass, field
from typing import Any

from kitchen.engine.errors import ConfigError
from train_core.renderers.content import get_text_content
from train_core.renderers.types import Message

NO_KEY = "unused"  # what a server that checks no key is sent (the client requires one)


@dataclass
class OpenAIChatCompleter:
    """`await completer(messages)`: the endpoint's reply to `messages`, as an assistant message."""

    base_url: str
    model: str
    max_tokens: int
    timeout_s: float = 60.0
    api_key_env: str | None = None
    temperature: float = 0.0
    _api_key: str = field(init=False, repr=False)
    # one client per event loop: an httpx connection pool belongs to the loop that opened it
    _clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = field(
        init=False, repr=False, default_factory=weakref.WeakKeyDictionary
    )

    def __post_init__(self) -> None:
        try:
            import openai  # noqa: F401
        except ModuleNotFoundError:
            raise ConfigError(
                f"the grader at {self.base_url} needs the openai client: pip install 'kitchen[eval]'"
            ) from None
        if self.api_key_env is None:
            self._api_key = NO_KEY
            return
        key = os.environ.get(self.api_key_env, "")
        if not key:
            raise ConfigError(
                f"${self.api_key_env} is not set; it should hold the API key of {self.base_url}"
            )
        self._api_key = key

    def _client(self) -> Any:
        import openai

        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is None:
            client = openai.AsyncOpenAI(base_url=self.base_url, api_key=self._api_key,
                                        timeout=self.timeout_s, max_retries=0)  # fmt: skip
            self._clients[loop] = client
        return client

    async def __call__(self, messages: list[Message]) -> Message:
        response = await self._client().chat.completions.create(
            model=self.model,
            messages=[{"role": m["role"], "content": get_text_content(m)} for m in messages],
            max_tokens=self.max_tokens,
            temperature=self.temperature,
        )
        return {"role": "assistant", "content": response.choices[0].message.content or ""}
