"""The Renderer base: messages -> tokens for sampling, tokens + loss weights for training, and back.

A concrete renderer says how one message looks (`render_message`: header, output, stop overlap),
what stops sampling, and how to parse sampled tokens. This base assembles conversations from
those pieces exactly as tinker-cookbook 0.6.1 does, so the token sequences and weights match it.

Weights are float32 numpy arrays, one per token (tinker-cookbook returns torch tensors; train_core
does not import torch). `torch.tensor(weights)` and `tinker.TensorData.from_numpy(weights)` both
take them as they are.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from typing import Any, Protocol, runtime_checkable

import numpy as np
import tinker

from train_core.renderers import types

# tinker-cookbook keeps these types in renderers/base: `from ...renderers.base import ToolCall` works.
from train_core.renderers.types import *  # noqa: F403
from train_core.renderers.types import (
    Message,
    ParseTermination,
    RenderContext,
    RenderedMessage,
    RendererError,
    Role,
    Tokenizer,
    ToolSpec,
    TrainOnWhat,
)

logger = logging.getLogger(__name__)

__all__ = [
    "Renderer",
    "ThinkingHistoryRenderer",
    "check_trainable_field",
    "encode_without_special_tokens",
    "message_contexts",
    "parse_response_for_stop_token",
    "single_token",
]
__all__ += types.__all__


@runtime_checkable
class _EncodesOrdinary(Protocol):
    def encode_ordinary(self, text: str) -> Any: ...


def encode_without_special_tokens(tokenizer: Tokenizer, text: str) -> list[int]:
    """Encode text without adding BOS/EOS (tiktoken-style `encode_ordinary` when the tokenizer has it)."""
    if isinstance(tokenizer, _EncodesOrdinary):
        return list(tokenizer.encode_ordinary(text))
    return list(tokenizer.encode(text, add_special_tokens=False))


def single_token(tokenizer: Tokenizer, text: str) -> int:
    """The id of `text`, which the format needs to be exactly one token (an end-of-turn marker)."""
    tokens = list(tokenizer.encode(text, add_special_tokens=False))
    if len(tokens) != 1:
        raise RendererError(f"{text} must be one token in this tokenizer, got {tokens}")
    return int(tokens[0])


def parse_response_for_stop_token(
    response: list[int], tokenizer: Tokenizer, stop_token: int
) -> tuple[Message, ParseTermination]:
    """Decode the tokens before `stop_token` into an assistant message.

    No stop token: the response was cut off (MALFORMED, all tokens decoded). More than one: the
    sampler was not told to stop on it, which is a caller bug, so raise.
    """
    count = response.count(stop_token)
    if count == 0:
        text = str(tokenizer.decode(response))
        return Message(role="assistant", content=text), ParseTermination.MALFORMED
    if count == 1:
        text = str(tokenizer.decode(response[: response.index(stop_token)]))
        return Message(role="assistant", content=text), ParseTermination.STOP_SEQUENCE
    raise RendererError(
        f"response holds {count} stop tokens ({stop_token}); expected at most 1: "
        "sample with this renderer's get_stop_sequences()"
    )


def _last_user_index(messages: list[Message]) -> int:
    return max((i for i, m in enumerate(messages) if m["role"] == "user"), default=-1)


def message_contexts(messages: list[Message], turn_start: int) -> list[RenderContext]:
    """Each message's RenderContext, given the index where the last assistant turn starts."""
    last_user = _last_user_index(messages)
    return [
        RenderContext(
            idx=idx,
            is_last=idx == len(messages) - 1,
            prev_message=messages[idx - 1] if idx > 0 else None,
            next_message=messages[idx + 1] if idx + 1 < len(messages) else None,
            last_user_index=last_user,
            in_last_assistant_turn=idx >= turn_start,
        )
        for idx in range(len(messages))
    ]


def check_trainable_field(message: Message, idx: int, train_on_what: TrainOnWhat) -> None:
    """Raise unless `message` has a 'trainable' field exactly when train_on_what is customized."""
    customized = train_on_what == TrainOnWhat.CUSTOMIZED
    if customized and "trainable" not in message:
        raise RendererError(
            f"message {idx} ({message['role']}) has no 'trainable' field; "
            "train_on_what=customized needs it on every message"
        )
    if not customized and "trainable" in message:
        raise RendererError(
            f"message {idx} ({message['role']}) has a 'trainable' field, which only "
            f"train_on_what=customized reads (got {train_on_what.value})"
        )


class Renderer(ABC):
    """Turns conversations into tokens (and loss weights) for one chat format, and parses replies.

    Subclasses implement `render_message` and either `_end_message_token` (with `_parse_reply_text`
    for tool calls and thinking) or, in a format without one stop token, `get_stop_sequences` and
    `parse_response`; they override the assembly methods only when the format is not a plain
    concatenation of messages.
    """

    tokenizer: Tokenizer

    disables_thinking: bool = False
    """True when the generation prompt closes the think block (the model is told not to reason)."""

    # Set by get_renderer, for logs and for rebuilding a renderer by name.
    _renderer_name: str | None = None
    _model_name: str | None = None

    def __init__(self, tokenizer: Tokenizer) -> None:
        self.tokenizer = tokenizer

    @property
    def has_extension_property(self) -> bool:
        """Whether each turn's prompt is a prefix of the next turn's (nothing is rewritten in history).

        When true, a multi-turn trajectory trains as one sequence and sampling can reuse the KV cache.
        """
        return False

    @property
    def _bos_tokens(self) -> list[int]:
        return []

    @abstractmethod
    def render_message(self, message: Message, ctx: RenderContext) -> RenderedMessage:
        """Split one message into header, output and stop overlap tokens."""

    @property
    def _end_message_token(self) -> int:
        """The one token that ends a reply, in formats that have one.

        The default `get_stop_sequences` and `parse_response` stop on it; a format with several
        stops (or strings) overrides those two instead.
        """
        raise NotImplementedError(f"{type(self).__name__} has no single end-of-message token")

    def get_stop_sequences(self) -> list[str] | list[int]:
        """Token ids or strings that end a sampled reply: by default the end-of-message token."""
        return [self._end_message_token]

    def parse_response(self, response: list[int]) -> tuple[Message, ParseTermination]:
        """Parse sampled tokens into an assistant message and how the reply ended.

        A best-effort message comes back even when the termination is MALFORMED. By default the
        reply is cut at the end-of-message token (after `_normalize_response_tokens`), and the
        text of a cleanly ended reply goes to `_parse_reply_text`.
        """
        message, termination = parse_response_for_stop_token(
            self._normalize_response_tokens(response), self.tokenizer, self._end_message_token
        )
        if termination.is_clean:
            text = message["content"]
            assert isinstance(text, str)  # parse_response_for_stop_token decodes to one string
            self._parse_reply_text(message, text)
        return message, termination

    def _parse_reply_text(self, message: Message, text: str) -> None:
        """Fill `message` (content, tool calls) from the text of a cleanly ended reply.

        By default the text is the content as it is.
        """
        message["content"] = text

    def _normalize_response_tokens(self, response: list[int]) -> list[int]:
        """Put back tokens the generation prompt prefilled (an open `<think>`) before parsing."""
        return response

    reasoning_content_field: bool = False
    """Whether `to_openai_message` moves thinking to `reasoning_content` (what the format's Hugging
    Face template reads) instead of writing it inline as `<think>` text."""

    def to_openai_message(self, message: Message) -> dict[str, Any]:
        """The message in OpenAI chat-completions form, e.g. for `apply_chat_template`."""
        result: dict[str, Any] = {"role": message["role"]}
        content = message["content"]
        if isinstance(content, str):
            result["content"] = content
        else:
            texts, thoughts = [], []
            for p in content:
                if p["type"] == "text":
                    texts.append(p["text"])
                elif p["type"] == "thinking":
                    if self.reasoning_content_field:
                        thoughts.append(p["thinking"])
                    else:
                        texts.append(f"<think>{p['thinking']}</think>")
                else:
                    raise RendererError(f"to_openai_message cannot convert a {p['type']!r} part")
            result["content"] = "".join(texts)
            if thoughts:
                result["reasoning_content"] = "".join(thoughts)
        if message.get("tool_calls"):
            result["tool_calls"] = [
                {
                    "type": "function",
                    "id": tc.id,
                    "function": {"name": tc.function.name, "arguments": tc.function.arguments},
                }
                for tc in message["tool_calls"]
            ]
        if message["role"] == "tool":
            if "tool_call_id" in message:
                result["tool_call_id"] = message["tool_call_id"]
            if "name" in message:
                result["name"] = message["name"]
        return result

    def create_conversation_prefix_with_tools(
        self, tools: list[ToolSpec], system_prompt: str = ""
    ) -> list[Message]:
        """Messages that declare `tools` (and the system prompt), to put before a conversation."""
        raise NotImplementedError(f"{type(self).__name__} has no tool-calling format")

    def _prepare_conversation(self, messages: list[Message]) -> list[Message]:
        """The conversation as the format renders it (a default system message added, tool results
        reordered); prompts and supervised examples both start from it. By default unchanged."""
        return messages

    def _get_generation_suffix(self, role: Role, ctx: RenderContext) -> list[int]:
        """Tokens that open the turn to be sampled: by default the header of an empty message."""
        rendered = self.render_message(Message(role=role, content=""), ctx)
        return list(rendered.header.tokens) if rendered.header else []

    def build_generation_prompt(
        self, messages: list[Message], role: Role = "assistant", prefill: str | None = None
    ) -> tinker.ModelInput:
        """The prompt to sample the next `role` turn from, optionally with the reply's start given."""
        messages = self._prepare_conversation(messages)
        chunks: list[tinker.ModelInputChunk] = []
        if self._bos_tokens:
            chunks.append(tinker.EncodedTextChunk(tokens=self._bos_tokens))
        turn_start = self._last_assistant_turn_start_index(messages)
        for message, ctx in zip(messages, message_contexts(messages, turn_start), strict=True):
            rendered = self.render_message(message, ctx)
            # The sampler rejects empty chunks, so they are left out of prompts.
            for chunk in ([rendered.header] if rendered.header else []) + rendered.output:
                if not isinstance(chunk, tinker.EncodedTextChunk) or chunk.tokens:
                    chunks.append(chunk)
        suffix_ctx = RenderContext(
            idx=len(messages),
            is_last=True,
            prev_message=messages[-1] if messages else None,
            last_user_index=_last_user_index(messages),
            in_last_assistant_turn=True,
        )
        suffix = self._get_generation_suffix(role, suffix_ctx)
        if suffix:
            chunks.append(tinker.EncodedTextChunk(tokens=suffix))
        if prefill:
            chunks.append(
                tinker.EncodedTextChunk(
                    tokens=encode_without_special_tokens(self.tokenizer, prefill)
                )
            )
        return tinker.ModelInput(chunks=chunks)

    def build_supervised_examples(
        self,
        messages: list[Message],
        train_on_what: TrainOnWhat = TrainOnWhat.LAST_ASSISTANT_TURN,
    ) -> list[tuple[tinker.ModelInput, np.ndarray]]:
        """Examples that train every selected assistant message on the prompt it was sampled from.

        With the extension property that is one example. Without it (history is rewritten), one
        example per trained assistant message, each ending at that message.
        """
        train_on_what = TrainOnWhat(train_on_what)
        if self.has_extension_property:
            return [self.build_supervised_example(messages, train_on_what=train_on_what)]
        match train_on_what:
            case TrainOnWhat.LAST_ASSISTANT_MESSAGE:
                candidates = range(len(messages) - 1, len(messages))
            case TrainOnWhat.LAST_ASSISTANT_TURN:
                candidates = range(self._last_assistant_turn_start_index(messages), len(messages))
            case TrainOnWhat.ALL_ASSISTANT_MESSAGES:
                candidates = range(len(messages))
            case _:
                raise RendererError(
                    f"build_supervised_examples cannot split train_on_what={train_on_what.value} "
                    f"for {type(self).__name__}: it rewrites history, and that mode weights "
                    "messages the model does not produce; use build_supervised_example"
                )
        return [
            self.build_supervised_example(
                messages[: idx + 1], train_on_what=TrainOnWhat.LAST_ASSISTANT_MESSAGE
            )
            for idx in candidates
            if messages[idx]["role"] == "assistant"
        ]

    def build_supervised_example(
        self,
        messages: list[Message],
        train_on_what: TrainOnWhat = TrainOnWhat.LAST_ASSISTANT_MESSAGE,
    ) -> tuple[tinker.ModelInput, np.ndarray]:
        """Tokens of the whole conversation and a float32 weight per token (1 = trained).

        Headers get weight only with ALL_TOKENS. Whatever the generation prompt for the trained
        turn would already contain (a prefilled `<think>`) gets weight 0.
        """
        train_on_what = TrainOnWhat(train_on_what)  # also accept the value strings
        messages = self._prepare_conversation(messages)
        if train_on_what == TrainOnWhat.ALL_ASSISTANT_MESSAGES and not self.has_extension_property:
            logger.warning(
                "train_on_what=all_assistant_messages with %s, which rewrites history: earlier "
                "assistant messages are trained on a prefix they were not sampled from; "
                "use build_supervised_examples to get one example per message",
                type(self).__name__,
            )
        pieces: list[tuple[tinker.ModelInputChunk, float]] = []
        if self._bos_tokens:
            pieces.append((tinker.EncodedTextChunk(tokens=self._bos_tokens), 0.0))
        turn_start = self._last_assistant_turn_start_index(messages[:-1])
        header_weight = float(train_on_what == TrainOnWhat.ALL_TOKENS)
        contexts = message_contexts(messages, turn_start)
        for idx, (message, ctx) in enumerate(zip(messages, contexts, strict=True)):
            check_trainable_field(message, idx, train_on_what)
            rendered = self.render_message(message, ctx)
            if rendered.header:
                pieces.append((rendered.header, header_weight))
            output_weight = float(self._output_is_trained(message, ctx, train_on_what))
            pieces.extend((chunk, output_weight) for chunk in rendered.output)
            if ctx.is_last and rendered.stop_overlap:
                pieces.append((rendered.stop_overlap, output_weight))
        weights_T = np.array(
            [w for chunk, w in pieces for _ in range(chunk.length)], dtype=np.float32
        )
        model_input = tinker.ModelInput(chunks=[chunk for chunk, _ in pieces])
        weights_T = self._train_after_the_generation_prompt(
            messages, train_on_what, model_input, weights_T
        )
        return model_input, weights_T

    def _train_after_the_generation_prompt(
        self,
        messages: list[Message],
        train_on_what: TrainOnWhat,
        model_input: tinker.ModelInput,
        weights_T: np.ndarray,
    ) -> np.ndarray:
        """Zero the weight of every token the generation prompt for the trained turn supplies.

        A prompt that ends in a prefill (an open `<think>`) would otherwise train the model to
        produce a token it is always given. When the render does not start with that prompt:
        a renderer that disables thinking was handed a turn that reasoned, which it cannot train
        faithfully (raise); any other renderer keeps its weights, as tinker-cookbook does.
        """
        boundary = self._first_trained_message_index(messages, train_on_what)
        if boundary is None:
            return weights_T
        if not all(isinstance(c, tinker.EncodedTextChunk) for c in model_input.chunks):
            return weights_T
        prompt = self.build_generation_prompt(messages[:boundary]).to_ints()
        if model_input.to_ints()[: len(prompt)] != prompt:
            if self.disables_thinking:
                raise RendererError(
                    f"{type(self).__name__} has thinking turned off, but the trained turn "
                    "contains reasoning: use the thinking variant of this renderer or drop the "
                    "reasoning from the turn"
                )
            return weights_T
        out_T = weights_T.copy()
        out_T[: len(prompt)] = 0.0
        return out_T

    def _output_is_trained(
        self, message: Message, ctx: RenderContext, train_on_what: TrainOnWhat
    ) -> bool:
        """Whether this message's output tokens carry loss under `train_on_what`."""
        is_assistant = message["role"] == "assistant"
        match train_on_what:
            case TrainOnWhat.LAST_ASSISTANT_MESSAGE:
                return ctx.is_last and is_assistant
            case TrainOnWhat.LAST_ASSISTANT_TURN:
                return is_assistant and ctx.in_last_assistant_turn
            case TrainOnWhat.ALL_ASSISTANT_MESSAGES:
                return is_assistant
            case TrainOnWhat.ALL_MESSAGES | TrainOnWhat.ALL_TOKENS:
                return True
            case TrainOnWhat.ALL_USER_AND_SYSTEM_MESSAGES:
                return message["role"] in ("user", "system")
            case TrainOnWhat.CUSTOMIZED:
                return bool(message.get("trainable", False))
        raise RendererError(f"unknown train_on_what {train_on_what!r}")

    def _last_assistant_turn_start_index(self, messages: list[Message]) -> int:
        """First message of the turn being produced: by default the one after the last user message."""
        return _last_user_index(messages) + 1

    def _first_trained_message_index(
        self, messages: list[Message], train_on_what: TrainOnWhat
    ) -> int | None:
        """Index of the assistant message the generation prompt stops before, for the modes that
        train the sampled turn; None otherwise."""
        match train_on_what:
            case TrainOnWhat.LAST_ASSISTANT_MESSAGE:
                boundary = len(messages) - 1
            case TrainOnWhat.LAST_ASSISTANT_TURN:
                boundary = _last_user_index(messages) + 1
            case _:
                return None
        if not 0 <= boundary < len(messages):
            return None
        return boundary if messages[boundary]["role"] == "assistant" else None


class ThinkingHistoryRenderer(Renderer):
    """A format whose template can drop the reasoning of earlier assistant turns.

    strip_thinking_from_history=False keeps it, so history is never rewritten: that, by default,
    is the extension property.
    """

    def __init__(self, tokenizer: Tokenizer, strip_thinking_from_history: bool = True) -> None:
        super().__init__(tokenizer)
        self.strip_thinking_from_history = strip_thinking_from_history

    @property
    def has_extension_property(self) -> bool:
        return not self.strip_thinking_from_history
