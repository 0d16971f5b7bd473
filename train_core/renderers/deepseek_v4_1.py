"""`deepseekv4_1` (with `_low_reasoning`, `_max_reasoning`, `_disable_thinking`,
`_preserve_thinking`): DeepSeek V4.1, as its Hugging Face chat template writes it.

    <｜begin▁of▁sentence｜><｜System｜>Reasoning Effort: 75 (range 1-100, ...)\\n\\n{system}
    <｜User｜>{question}<｜Assistant｜><think>{reasoning}</think>{answer}<｜end▁of▁sentence｜>

(one line in reality). In thinking mode every conversation opens with the system marker and the
effort line (50 low, 75 high, 100 max); chat mode has no effort line and closes the think block in
the assistant marker (`<｜Assistant｜></think>`). Tools are a section of the system turn and calls
are DSML blocks (deepseek_dsml.py). Tool results are `<tool_result>` blocks of a user turn, in the
order of the calls; consecutive tool and user messages form one user turn, joined by blank lines.
Reasoning before the last user turn is dropped, unless tools are declared or
strip_thinking_from_history=False.
"""

from __future__ import annotations

import contextvars
import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Literal

import numpy as np
import tinker

from train_core.renderers.base import ThinkingHistoryRenderer, single_token
from train_core.renderers.content import ensure_text, parse_think_blocks
from train_core.renderers.deepseek_dsml import (
    arguments_dict,
    split_tool_calls,
    tools_section,
    write_tool_calls,
)
from train_core.renderers.types import (
    Message,
    RenderContext,
    RenderedMessage,
    RendererError,
    Role,
    Tokenizer,
    ToolSpec,
    TrainOnWhat,
)

ReasoningEffort = Literal["low", "high", "max"]
_EFFORT_BUDGET: dict[str, int] = {"low": 50, "high": 75, "max": 100}
_EFFORT_LINE = (
    "Reasoning Effort: {} (range 1-100, the higher the value, the more thorough the reasoning)\n\n"
)

# Whether an assistant message keeps its reasoning depends on the whole conversation (its last
# user turn, whether tools are declared), but the base class renders one message at a time. The
# conversation builders set this to the index through which reasoning is dropped (-1: none) while
# they run; it being set also tells a nested builder call (the base class asks for the generation
# prompt of a prefix) that its messages are already in template shape.
_DROP_REASONING_THROUGH: contextvars.ContextVar[int | None] = contextvars.ContextVar(
    "deepseek_v4_1_drop_reasoning_through", default=None
)


def _in_user_turn(message: Message) -> bool:
    return message["role"] in ("user", "tool")


def _reasoning_and_answer(message: Message) -> tuple[str, str]:
    content = message["content"]
    if isinstance(content, str):
        return "", content
    for part in content:
        if part["type"] not in ("text", "thinking"):
            raise RendererError(
                f"DeepSeek V4.1 renders text and thinking parts, got {part['type']!r}"
            )
    reasoning = "".join(p["thinking"] for p in content if p["type"] == "thinking")
    return reasoning, "".join(p["text"] for p in content if p["type"] == "text")


def _fold_tool_declaration(messages: list[Message]) -> None:
    """Move the `tool_declare` message's tools into the first system message, in place."""
    for idx, message in enumerate(messages):
        if message["role"] != "tool_declare":
            continue
        functions = [t["function"] for t in json.loads(ensure_text(message["content"]))]
        section = tools_section(functions)
        if idx == 0:
            messages[0] = {**message, "role": "system", "content": "\n\n" + section}
        elif idx == 1 and messages[0]["role"] == "system":
            system = ensure_text(messages[0]["content"])
            messages[0] = {**messages[0], "content": f"{system}\n\n{section}"}
            messages[1] = {**message, "content": ""}
        else:
            raise RendererError(
                f"DeepSeek V4.1 declares tools first or right after the first system message, "
                f"not at message {idx}; use create_conversation_prefix_with_tools"
            )


def _merge_user_turns(messages: list[Message]) -> None:
    """Give each run of user and tool messages one text, on its first message, in place.

    Tool results are put in the order of the calls that asked for them (a stable sort; an
    unknown id sorts first), in the positions tool messages hold. The run is encoded as one
    string because BPE merges across the blank lines that join it. The other messages of the
    run stay, empty, so that indices (which turn is last, what is trained) do not move.
    """
    call_order: dict[str, int] = {}
    idx = 0
    while idx < len(messages):
        if tool_calls := messages[idx].get("tool_calls"):
            call_order = {tc.id: n for n, tc in enumerate(tool_calls) if tc.id}
        if not _in_user_turn(messages[idx]):
            idx += 1
            continue
        end = idx + 1
        while end < len(messages) and _in_user_turn(messages[end]):
            end += 1
        run = messages[idx:end]
        results = iter(
            sorted(
                (m for m in run if m["role"] == "tool"),
                key=lambda m: call_order.get(m.get("tool_call_id") or "", 0),
            )
        )
        texts = [
            f"<tool_result>{ensure_text(next(results)['content'])}</tool_result>"
            if m["role"] == "tool"
            else ensure_text(m["content"])
            for m in run
        ]
        messages[idx] = {**messages[idx], "content": "\n\n".join(texts)}
        for rest in range(idx + 1, end):
            messages[rest] = {**messages[rest], "content": ""}
        idx = end


def _last_user_turn(messages: list[Message]) -> int:
    """Index of the template's last user turn: user and tool messages, and later system ones."""
    return max(
        (
            i
            for i, m in enumerate(messages)
            if _in_user_turn(m) or (m["role"] == "system" and i > 0)
        ),
        default=-1,
    )


class DeepSeekV4_1Renderer(ThinkingHistoryRenderer):
    """DeepSeek V4.1. reasoning_effort None is chat mode (no reasoning);
    strip_thinking_from_history=False keeps earlier reasoning (the extension property)."""

    reasoning_content_field = True

    def __init__(
        self,
        tokenizer: Tokenizer,
        reasoning_effort: ReasoningEffort | None = "high",
        strip_thinking_from_history: bool = True,
    ) -> None:
        super().__init__(tokenizer, strip_thinking_from_history)
        self.reasoning_effort = reasoning_effort

    @property
    def _thinking(self) -> bool:
        return self.reasoning_effort is not None

    @property
    def has_extension_property(self) -> bool:
        return not (self._thinking and self.strip_thinking_from_history)

    def _encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def _encode_split(self, prefix: str, text: str) -> tuple[list[int], list[int]]:
        """`prefix + text` encoded as one string, split where `prefix` ends; a token that
        straddles the boundary (BPE merges the effort line's `\\n\\n` with what follows) goes
        with the prefix."""
        tokens = self._encode(prefix + text)
        split = 0
        while split < len(tokens) and len(self.tokenizer.decode(tokens[:split])) < len(prefix):
            split += 1
        return tokens[:split], tokens[split:]

    @property
    def _bos_tokens(self) -> list[int]:
        return self._encode("<｜begin▁of▁sentence｜>")

    @property
    def _end_message_token(self) -> int:
        return single_token(self.tokenizer, "<｜end▁of▁sentence｜>")

    def _opening(self, role: Role) -> str:
        """What precedes the first message: the system marker, and the effort when thinking."""
        if self.reasoning_effort is not None:
            return "<｜System｜>" + _EFFORT_LINE.format(_EFFORT_BUDGET[self.reasoning_effort])
        return "<｜System｜>" if role == "system" else ""

    def _last_assistant_turn_start_index(self, messages: list[Message]) -> int:
        """After the last user message or later system message (the template's user turns)."""
        starts = [
            i + 1
            for i, m in enumerate(messages)
            if m["role"] == "user" or (m["role"] == "system" and i > 0)
        ]
        return max(starts, default=0)

    def render_message(self, message: Message, ctx: RenderContext) -> RenderedMessage:
        """Render one message of a conversation already in template shape (`_template_turns`)."""
        role = message["role"]
        opening = self._opening(role) if ctx.idx == 0 else ""
        if role == "system":
            marker = opening if ctx.idx == 0 else "<｜System｜>"
            header, body = self._encode_split(marker, ensure_text(message["content"]))
            return RenderedMessage(
                header=tinker.EncodedTextChunk(tokens=header),
                output=[tinker.EncodedTextChunk(tokens=body)] if body else [],
            )
        if role == "tool_declare":  # its tools were moved into the system turn
            return RenderedMessage(output=[])
        if _in_user_turn(message):
            if ctx.prev_message is not None and _in_user_turn(ctx.prev_message):
                return RenderedMessage(output=[])  # the run's first message holds its text
            body = self._encode(ensure_text(message["content"]))
            return RenderedMessage(
                header=tinker.EncodedTextChunk(tokens=self._encode(opening + "<｜User｜>")),
                output=[tinker.EncodedTextChunk(tokens=body)] if body else [],
            )
        if role != "assistant":
            raise RendererError(
                f"DeepSeek V4.1 has no role {role!r}; expected system, user, assistant or tool"
            )
        return self._render_assistant(message, ctx, opening)

    def _render_assistant(
        self, message: Message, ctx: RenderContext, opening: str
    ) -> RenderedMessage:
        dropped_through = _DROP_REASONING_THROUGH.get()
        keeps_reasoning = self._thinking and ctx.idx > (
            -1 if dropped_through is None else dropped_through
        )
        # The assistant marker closes a user turn; an assistant message that follows no user
        # turn (only the leading system message, or another assistant message) has none.
        prev = ctx.prev_message
        after_user_turn = prev is not None and (
            _in_user_turn(prev) or (prev["role"] == "system" and ctx.idx > 1)
        )
        marker = "<｜Assistant｜>" + ("<think>" if keeps_reasoning else "</think>")
        header_text = opening + (marker if after_user_turn else "")
        reasoning, answer = _reasoning_and_answer(message)
        body = (reasoning + "</think>" if keeps_reasoning else "") + answer
        if tool_calls := message.get("tool_calls"):
            body += write_tool_calls(tool_calls)
        tokens = [*self._encode(body), self._end_message_token]
        output: list[tinker.ModelInputChunk] = [tinker.EncodedTextChunk(tokens=tokens)]
        if not header_text:
            return RenderedMessage(output=output)
        header = tinker.EncodedTextChunk(tokens=self._encode(header_text))
        return RenderedMessage(header=header, output=output)

    @contextmanager
    def _template_turns(self, messages: list[Message]) -> Iterator[list[Message]]:
        """The conversation in the template's shape, with the reasoning cut-off set."""
        if _DROP_REASONING_THROUGH.get() is not None:
            yield messages  # a nested call, on a prefix already reshaped
            return
        shaped = list(messages)
        _fold_tool_declaration(shaped)
        _merge_user_turns(shaped)
        declares_tools = any(m["role"] == "tool_declare" for m in messages)
        drops = self.strip_thinking_from_history and not declares_tools
        token = _DROP_REASONING_THROUGH.set(_last_user_turn(shaped) if drops else -1)
        try:
            yield shaped
        finally:
            _DROP_REASONING_THROUGH.reset(token)

    def build_generation_prompt(
        self, messages: list[Message], role: Role = "assistant", prefill: str | None = None
    ) -> tinker.ModelInput:
        with self._template_turns(messages) as shaped:
            return super().build_generation_prompt(shaped, role, prefill)

    def build_supervised_example(
        self,
        messages: list[Message],
        train_on_what: TrainOnWhat = TrainOnWhat.LAST_ASSISTANT_MESSAGE,
    ) -> tuple[tinker.ModelInput, np.ndarray]:
        """As the base class; tool and user messages of one user turn are weighted together,
        by the turn's first message."""
        with self._template_turns(messages) as shaped:
            return super().build_supervised_example(shaped, train_on_what)

    def _normalize_response_tokens(self, response: list[int]) -> list[int]:
        """Put back the `<think>` the thinking-mode prompt prefilled."""
        if not self._thinking:
            return response
        think_open = single_token(self.tokenizer, "<think>")
        think_close = single_token(self.tokenizer, "</think>")
        if think_close in response and response[0] != think_open:
            return [think_open, *response]
        return response

    def _parse_reply_text(self, message: Message, text: str) -> None:
        """Reasoning into ThinkingParts and the DSML block into tool calls."""
        text, tool_calls, unparsed = split_tool_calls(text)
        if tool_calls:
            message["tool_calls"] = tool_calls
        if unparsed:
            message["unparsed_tool_calls"] = unparsed
        parts = parse_think_blocks(text)
        message["content"] = parts if parts is not None else text

    def to_openai_message(self, message: Message) -> dict[str, Any]:
        """With `reasoning_content`, and arguments as dicts (the template iterates over them)."""
        result = super().to_openai_message({**message, "content": ""})
        if message["role"] != "assistant":
            result["content"] = ensure_text(message["content"])
        else:
            reasoning, result["content"] = _reasoning_and_answer(message)
            if reasoning:
                result["reasoning_content"] = reasoning
        for call in result.get("tool_calls", []):
            call["function"]["arguments"] = arguments_dict(call["function"]["arguments"])
        return result

    def create_conversation_prefix_with_tools(
        self, tools: list[ToolSpec], system_prompt: str = ""
    ) -> list[Message]:
        """The system message (when given), then a `tool_declare` message. The tools render in
        the system turn; the separate message marks the conversation as declaring tools, which
        keeps earlier reasoning."""
        messages: list[Message] = []
        if system_prompt:
            messages.append(Message(role="system", content=system_prompt))
        if tools:
            payload = [{"type": "function", "function": dict(tool)} for tool in tools]
            messages.append(Message(role="tool_declare", content=json.dumps(payload)))
        return messages
