"""The request bodies of the OpenAI-compatible routes, as the official client sends them.

Fields the local engine has no equivalent for are refused with a one-line error when they would
change the answer (penalties, logit bias, best_of, forced tool choice, structured output), and
ignored when they would not (user, metadata, store). `return_token_ids` is vLLM's: the prompt's and
each choice's token ids come back (`prompt_token_ids`, `choices[].token_ids`).
"""

from __future__ import annotations

from typing import Any

import pydantic
from pydantic import Field

# Fields that would silently change the result if ignored: refused unless at their neutral value.
_NEUTRAL: dict[str, Any] = {
    "frequency_penalty": 0,
    "presence_penalty": 0,
    "logit_bias": None,
    "best_of": 1,
    "functions": None,  # the deprecated function-calling fields: `tools` replaces them
    "function_call": None,
    "prediction": None,
    "audio": None,
    "min_p": 0,  # vLLM's sampling extras the engine has no equivalent for
    "repetition_penalty": 1,
}


class _Request(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="allow")

    model: str = Field(
        description="a base model name, tinker://.../sampler_weights/NAME, or a folder"
    )
    temperature: float = Field(1.0, ge=0, le=2, description="0 is greedy")
    top_p: float = Field(1.0, gt=0, le=1, description="nucleus sampling mass")
    top_k: int | None = Field(
        None, ge=-1, description="vLLM's: keep the k likeliest tokens (-1 or None: all)"
    )
    n: int = Field(1, ge=1, le=128, description="samples per prompt")
    stop: str | list[str] | None = Field(None, description="up to 4 strings that end a sample")
    seed: int | None = Field(
        None, ge=-(2**63), lt=2**64, description="same seed and request: same samples (64-bit)"
    )
    stream: bool = Field(False, description="answer as server-sent events, token by token")
    stream_options: dict[str, Any] | None = Field(None, description="include_usage: a last chunk")
    return_token_ids: bool = Field(
        False, description="vLLM's: return prompt_token_ids and each choice's token_ids"
    )

    @pydantic.model_validator(mode="after")
    def _refuse_unsupported(self) -> _Request:
        for name, neutral in _NEUTRAL.items():
            value = (self.model_extra or {}).get(name, neutral)
            if value not in (neutral, None):
                raise ValueError(f"{name}={value!r} is not supported by kitchen serve")
        return self

    @pydantic.field_validator("top_k")
    @classmethod
    def _k(cls, top_k: int | None) -> int | None:
        if top_k == 0:
            raise ValueError("top_k is 0; expected -1 (no limit) or at least 1")
        return top_k

    @pydantic.field_validator("stop")
    @classmethod
    def _at_most_four(cls, stop: str | list[str] | None) -> str | list[str] | None:
        if isinstance(stop, list) and len(stop) > 4:
            raise ValueError(f"stop has {len(stop)} strings; expected at most 4")
        return stop

    @property
    def stop_strings(self) -> list[str]:
        stops = [self.stop] if isinstance(self.stop, str) else list(self.stop or [])
        return [s for s in stops if s]

    @property
    def include_usage(self) -> bool:
        return bool((self.stream_options or {}).get("include_usage"))


class CompletionRequest(_Request):
    prompt: str | list[str] | list[int] | list[list[int]] = Field(
        description="text, token ids, or a batch of either"
    )
    max_tokens: int | None = Field(16, ge=0, description="tokens to generate (OpenAI's default 16)")
    echo: bool = Field(False, description="prefix each choice with its prompt (and its logprobs)")
    logprobs: int | None = Field(None, ge=0, le=20, description="top alternatives per token")
    suffix: None = Field(None, description="insertion is not supported")


class ChatRequest(_Request):
    messages: list[dict[str, Any]] = Field(min_length=1, description="the conversation so far")
    max_tokens: int | None = Field(
        None, ge=1, description="tokens to generate (default: to the context)"
    )
    max_completion_tokens: int | None = Field(None, ge=1, description="newer name of max_tokens")
    logprobs: bool = Field(False, description="return each generated token's logprob")
    top_logprobs: int | None = Field(None, ge=0, le=20, description="top alternatives per token")
    tools: list[dict[str, Any]] | None = Field(None, description="functions the model may call")
    tool_choice: str | dict[str, Any] | None = Field(
        None, description='"auto" (the default) or "none"; forcing a call is refused'
    )
    response_format: dict[str, Any] | None = Field(
        None, description='{"type": "text"} only: structured output is refused'
    )

    @pydantic.field_validator("tools")
    @classmethod
    def _functions(cls, tools: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
        for i, tool in enumerate(tools or []):
            function = tool.get("function")
            if tool.get("type", "function") != "function" or not isinstance(function, dict):
                raise ValueError(
                    f"tools[{i}]: expected {{'type': 'function', 'function': {{...}}}}"
                )
            if not isinstance(function.get("name"), str) or not function["name"]:
                raise ValueError(f"tools[{i}].function.name: expected a non-empty string")
        return tools

    @pydantic.field_validator("tool_choice")
    @classmethod
    def _auto_or_none(cls, choice: str | dict[str, Any] | None) -> str | dict[str, Any] | None:
        if choice in (None, "auto", "none"):
            return choice
        raise ValueError(
            f"tool_choice={choice!r} is not supported (the chat format cannot force a call); "
            'use "auto" or "none"'
        )

    @pydantic.field_validator("response_format")
    @classmethod
    def _text_only(cls, fmt: dict[str, Any] | None) -> dict[str, Any] | None:
        if fmt is None or fmt.get("type") == "text":
            return fmt
        raise ValueError(
            f"response_format type {fmt.get('type')!r} is not supported (no structured output); "
            'omit it or use {"type": "text"}'
        )

    @property
    def offered_tools(self) -> list[dict[str, Any]] | None:
        """The tools the prompt declares: none with tool_choice "none"."""
        return None if self.tool_choice == "none" else self.tools

    @property
    def token_limit(self) -> int | None:
        return self.max_completion_tokens or self.max_tokens
