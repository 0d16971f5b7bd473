"""Data types shared by every chat renderer: messages, content parts, tool calls, loss masks.

The shapes follow tinker-cookbook 0.6.1 (`tinker_cookbook.renderers`), so code written against it
runs unchanged: a `Message` is a TypedDict, content is a string or a list of typed parts, and tool
calls are frozen pydantic models in the OpenAI function-calling layout.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Literal, NotRequired, TypeAlias, TypedDict

import pydantic
import tinker

__all__ = [
    "AudioPart",
    "Content",
    "ContentPart",
    "ImagePart",
    "Message",
    "ParseFailureKind",
    "ParseTermination",
    "RenderContext",
    "RenderedMessage",
    "RendererError",
    "Role",
    "TextPart",
    "ThinkingPart",
    "Tokenizer",
    "ToolCall",
    "ToolSpec",
    "TrainOnWhat",
    "UnparsedToolCall",
]

# A tokenizer is any Hugging Face tokenizer (or object with the same `encode`, `decode`,
# `convert_tokens_to_ids`, `bos_token`, `eos_token_id`). Kept as Any so that importing this
# module never imports transformers, and so mypy does not fight transformers' loose signatures.
Tokenizer: TypeAlias = Any

# Broad on purpose: common roles are system, user, assistant and tool, but formats add their
# own (Kimi's "tool_declare", Harmony's "developer").
Role: TypeAlias = str


class RendererError(ValueError):
    """A renderer name is unknown, a conversation cannot be rendered, or a response cannot be parsed."""


class ParseTermination(StrEnum):
    """How a sampled response ended, as seen by `Renderer.parse_response`."""

    STOP_SEQUENCE = "stop_sequence"
    """The renderer's own stop signal (`<|im_end|>`, `\\n\\nUser:`, ...) ended the response."""

    EOS = "eos"
    """The model's EOS token ended it; some renderers accept that as a clean end."""

    MALFORMED = "malformed"
    """No clean end: truncated at max_tokens, or stop signals in the wrong place."""

    @property
    def is_clean(self) -> bool:
        """True for STOP_SEQUENCE and EOS: what grading should gate on."""
        return self != ParseTermination.MALFORMED

    @property
    def is_stop_sequence(self) -> bool:
        """True only for the renderer's own stop signal: the strict format-reward gate."""
        return self == ParseTermination.STOP_SEQUENCE


class ParseFailureKind(StrEnum):
    """What `classify_parse_failure` found wrong with a parsed response."""

    STRUCTURAL = "structural"
    """The response did not end cleanly; the episode cannot be continued faithfully."""

    CONTENT = "content"
    """It ended cleanly but a tool call inside did not parse; the model can be asked again."""


class _Frozen(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(frozen=True, extra="forbid")

    def __str__(self) -> str:
        return repr(self)


class ToolCall(_Frozen):
    """A request to call a function, in the OpenAI layout: `function.name` and JSON `arguments`."""

    class FunctionBody(pydantic.BaseModel):
        """The function name and its arguments as a JSON string."""

        name: str
        arguments: str

    type: Literal["function"] = "function"
    id: str | None = None
    function: FunctionBody


class UnparsedToolCall(_Frozen):
    """Model output that looked like a tool call but did not parse; keeps the raw text and why."""

    raw_text: str
    error: str


class TextPart(TypedDict):
    """Visible text."""

    type: Literal["text"]
    text: str


class ThinkingPart(TypedDict):
    """The model's reasoning (chain of thought)."""

    type: Literal["thinking"]
    thinking: str


class ImagePart(TypedDict):
    """An image (URL, data URI or PIL image). Accepted for type compatibility; the text renderers here refuse it."""

    type: Literal["image"]
    image: Any


class AudioPart(TypedDict):
    """Input audio. Accepted for type compatibility; the text renderers here refuse it."""

    type: Literal["audio"]
    audio: str | bytes
    format: NotRequired[Literal["wav", "mp3", "flac"]]
    num_frames: NotRequired[int]
    sample_rate: NotRequired[int]


# Tool calls are never content parts: they live in message["tool_calls"].
ContentPart: TypeAlias = TextPart | ImagePart | AudioPart | ThinkingPart
Content: TypeAlias = str | list[ContentPart]


class Message(TypedDict):
    """One turn of a conversation.

    role: "system" | "user" | "assistant" | "tool" (| format-specific roles)
    content: a string, or a list of TextPart / ThinkingPart (/ ImagePart, AudioPart)
    tool_calls: parsed tool calls the assistant made
    unparsed_tool_calls: tool-call-looking output that failed to parse
    trainable: per-message loss switch, read only with TrainOnWhat.CUSTOMIZED (and then required)
    tool_call_id: on a tool result, the ToolCall.id it answers (Kimi K2 writes it)
    name: on a tool result, the function name (gpt-oss and Kimi K2 write it)
    """

    role: Role
    content: Content
    tool_calls: NotRequired[list[ToolCall]]
    unparsed_tool_calls: NotRequired[list[UnparsedToolCall]]
    trainable: NotRequired[bool]
    tool_call_id: NotRequired[str]
    name: NotRequired[str]


class ToolSpec(TypedDict):
    """A tool the model may call, in the OpenAI function layout (JSON-schema parameters)."""

    name: str
    description: str
    parameters: dict[str, Any]


class TrainOnWhat(StrEnum):
    """Which tokens of a supervised example carry loss (weight 1); everything else gets 0."""

    LAST_ASSISTANT_MESSAGE = "last_assistant_message"
    LAST_ASSISTANT_TURN = "last_assistant_turn"
    ALL_ASSISTANT_MESSAGES = "all_assistant_messages"
    ALL_MESSAGES = "all_messages"
    ALL_TOKENS = "all_tokens"
    ALL_USER_AND_SYSTEM_MESSAGES = "all_user_and_system_messages"
    CUSTOMIZED = "customized"


@dataclass
class RenderContext:
    """Where a message sits in its conversation, for renderers whose output depends on position."""

    idx: int
    is_last: bool
    prev_message: Message | None = None
    next_message: Message | None = None
    last_user_index: int = -1
    """Index of the last user message; -1 when there is none."""
    in_last_assistant_turn: bool = False
    """Whether the message belongs to the turn being produced (which may span tool exchanges)."""


@dataclass(frozen=True)
class RenderedMessage:
    """One message split for loss masking.

    header: role markers the model reads but does not produce (weight 0 unless ALL_TOKENS).
    output: what the model produces for this turn, end-of-turn marker included.
    stop_overlap: tokens of the stop sequence that belong to the next header; appended only
        after the last message (RoleColon's "User:" of "\\n\\nUser:").
    """

    output: list[tinker.ModelInputChunk]
    header: tinker.EncodedTextChunk | None = None
    stop_overlap: tinker.EncodedTextChunk | None = None
