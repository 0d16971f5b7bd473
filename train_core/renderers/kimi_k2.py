"""`kimi_k2`: Moonshot's Kimi K2 Thinking format.

    <|im_system|>system<|im_middle|>You are Kimi, ...<|im_end|>
    <|im_user|>user<|im_middle|>What is 2+2?<|im_end|>
    <|im_assistant|>assistant<|im_middle|><think>reasoning</think>4<|im_end|>

Like the Hugging Face template, a default system message is added when there is none, and
assistant turns before the current turn keep an empty `<think></think>`. A turn here spans the
whole assistant/tool exchange after the last assistant message that made no tool call.
"""

from __future__ import annotations

import json
import re
import warnings
from typing import Any

import numpy as np
import tinker

from train_core.renderers.base import Renderer, single_token
from train_core.renderers.content import (
    detect_unterminated_tool_block,
    ensure_list,
    ensure_text,
    parse_think_blocks,
    reject_media,
)
from train_core.renderers.types import (
    ContentPart,
    Message,
    RenderContext,
    RenderedMessage,
    RendererError,
    TextPart,
    Tokenizer,
    ToolCall,
    ToolSpec,
    TrainOnWhat,
    UnparsedToolCall,
)

# Both spellings of the section markers occur in Kimi outputs.
_SECTION_RE = re.compile(
    r"<\|tool_calls_section_begin\|>(.*?)<\|tool_calls_section_end\|>"
    r"|<\|tool_call_section_begin\|>(.*?)<\|tool_call_section_end\|>",
    re.DOTALL,
)
_CALL_RE = re.compile(
    r"<\|tool_call_begin\|>\s*([^<]+:\d+)\s*<\|tool_call_argument_begin\|>\s*(.*?)\s*<\|tool_call_end\|>",
    re.DOTALL,
)
_BLOCK_MARKERS = (
    ("<|tool_calls_section_begin|>", "<|tool_calls_section_end|>"),
    ("<|tool_call_section_begin|>", "<|tool_call_section_end|>"),
    ("<|tool_call_begin|>", "<|tool_call_end|>"),
)


def _function_name(call_id: str) -> str:
    """`functions.get_weather:0` -> `get_weather`."""
    name = call_id.split(":", 1)[0]
    return name.split(".", 1)[1] if "." in name else name


def _parse_section(section: str) -> tuple[list[ToolCall], list[UnparsedToolCall]]:
    calls: list[ToolCall] = []
    unparsed: list[UnparsedToolCall] = []
    for m in _CALL_RE.finditer(section):
        call_id, arguments = m.group(1).strip(), m.group(2).strip()
        try:
            json.loads(arguments)
        except json.JSONDecodeError as e:
            unparsed.append(UnparsedToolCall(raw_text=m.group(0), error=f"Invalid JSON: {e}"))
            continue
        calls.append(
            ToolCall(
                function=ToolCall.FunctionBody(name=_function_name(call_id), arguments=arguments),
                id=call_id or None,
            )
        )
    return calls, unparsed


class KimiK2Renderer(Renderer):
    """Kimi K2 Thinking. strip_thinking_from_history=False keeps earlier reasoning (extension property)."""

    DEFAULT_SYSTEM_PROMPT = "You are Kimi, an AI assistant created by Moonshot AI."
    reasoning_content_field = True

    def __init__(self, tokenizer: Tokenizer, strip_thinking_from_history: bool = True) -> None:
        super().__init__(tokenizer)
        self.strip_thinking_from_history = strip_thinking_from_history

    def _prepare_conversation(self, messages: list[Message]) -> list[Message]:
        """Add the default system message where the template would (after a tool_declare)."""
        default = Message(role="system", content=self.DEFAULT_SYSTEM_PROMPT)
        if not messages:
            return [default]
        if messages[0]["role"] == "tool_declare":
            if len(messages) >= 2 and messages[1]["role"] == "system":
                return messages
            return [messages[0], default, *messages[1:]]
        if messages[0]["role"] != "system":
            return [default, *messages]
        return messages

    def _encode(self, text: str) -> list[int]:
        # Kimi's tokenizer adds nothing by default; called the way tinker-cookbook calls it.
        return list(self.tokenizer.encode(text))

    def render_message(self, message: Message, ctx: RenderContext) -> RenderedMessage:
        role = message["role"]
        if role == "user":
            header = f"<|im_user|>{role}<|im_middle|>"
        elif role == "assistant":
            header = f"<|im_assistant|>{role}<|im_middle|>"
        elif role == "tool":
            name = message.get("name")
            if not name:
                warnings.warn(
                    "Kimi K2 tool message has no 'name'; writing 'tool' in its place",
                    UserWarning,
                    stacklevel=3,
                )
                name = role
            call_id = message.get("tool_call_id", "")
            if not call_id:
                warnings.warn(
                    "Kimi K2 tool message has no 'tool_call_id'; set it to the ToolCall.id it answers",
                    UserWarning,
                    stacklevel=3,
                )
            header = f"<|im_system|>{name}<|im_middle|>## Return of {call_id}\n"
        else:
            # system, tool_declare and any other role use the system marker with their own name.
            header = f"<|im_system|>{role}<|im_middle|>"

        content = message["content"]
        if role == "assistant":
            reject_media(content, type(self).__name__)
            parts = ensure_list(content)
            thinking = "".join(p["thinking"] for p in parts if p["type"] == "thinking")
            text = "".join(p["text"] for p in parts if p["type"] == "text")
            keep = ctx.in_last_assistant_turn or not self.strip_thinking_from_history
            body = (f"<think>{thinking}</think>" if keep and thinking else "<think></think>") + text
            if message.get("tool_calls"):
                body += "<|tool_calls_section_begin|>"
                for i, tc in enumerate(message["tool_calls"]):
                    call_id = tc.id or f"functions.{tc.function.name}:{i}"
                    body += (
                        f"<|tool_call_begin|>{call_id}<|tool_call_argument_begin|>"
                        f"{tc.function.arguments}<|tool_call_end|>"
                    )
                body += "<|tool_calls_section_end|>"
            body += "<|im_end|>"
        elif isinstance(content, str) or (len(content) == 1 and content[0]["type"] == "text"):
            body = ensure_text(content) + "<|im_end|>"
        else:
            return RenderedMessage(
                header=tinker.EncodedTextChunk(tokens=self._encode(header)),
                output=self._render_parts([*content, TextPart(type="text", text="<|im_end|>")]),
            )
        return RenderedMessage(
            header=tinker.EncodedTextChunk(tokens=self._encode(header)),
            output=[tinker.EncodedTextChunk(tokens=self._encode(body))],
        )

    def _render_parts(self, parts: list[ContentPart]) -> list[tinker.ModelInputChunk]:
        """A non-assistant message of several parts (e.g. text and images), end marker included."""
        raise RendererError(
            f"Kimi K2 renders non-assistant messages as a single text, got {len(parts) - 1} parts"
        )

    def build_supervised_examples(
        self,
        messages: list[Message],
        train_on_what: TrainOnWhat = TrainOnWhat.LAST_ASSISTANT_TURN,
    ) -> list[tuple[tinker.ModelInput, np.ndarray]]:
        """One example per user turn (history loses its reasoning, so turns cannot share one).

        ALL_ASSISTANT_MESSAGES trains each turn's last assistant turn; other modes apply as given
        to every turn's example.
        """
        train_on_what = TrainOnWhat(train_on_what)
        if train_on_what in (TrainOnWhat.LAST_ASSISTANT_MESSAGE, TrainOnWhat.LAST_ASSISTANT_TURN):
            return [self.build_supervised_example(messages, train_on_what=train_on_what)]
        if train_on_what != TrainOnWhat.ALL_ASSISTANT_MESSAGES:
            warnings.warn(
                f"kimi_k2 splits the conversation per user turn and applies "
                f"train_on_what={train_on_what.value} to every turn's example",
                UserWarning,
                stacklevel=2,
            )
        per_turn = (
            TrainOnWhat.LAST_ASSISTANT_TURN
            if train_on_what == TrainOnWhat.ALL_ASSISTANT_MESSAGES
            else train_on_what
        )
        user_idxs = [i for i, m in enumerate(messages) if m["role"] == "user"]
        return [
            self.build_supervised_example(messages[:end], train_on_what=per_turn)
            for end in [*user_idxs[1:], len(messages)]
        ]

    def _last_assistant_turn_start_index(self, messages: list[Message]) -> int:
        """After the last assistant message that made no tool call (the template keeps reasoning
        from there on)."""
        for idx in range(len(messages) - 1, -1, -1):
            if messages[idx]["role"] == "assistant" and not messages[idx].get("tool_calls"):
                return idx + 1
        return 0

    @property
    def _end_message_token(self) -> int:
        return single_token(self.tokenizer, "<|im_end|>")

    def _parse_reply_text(self, message: Message, text: str) -> None:
        """The tool-call section goes to tool_calls, `<think>` blocks to ThinkingParts, and the
        text before the section stays as content."""
        before = text
        section_match = _SECTION_RE.search(text)
        if section_match is not None:
            before = text[: section_match.start()]
            section = section_match.group(1)
            if section is None:
                section = section_match.group(2)
            calls, unparsed = _parse_section(section)
            if calls:
                message["tool_calls"] = calls
            if unparsed:
                message["unparsed_tool_calls"] = unparsed
        for open_marker, close_marker in _BLOCK_MARKERS:
            dangling = detect_unterminated_tool_block(text, open_marker, close_marker)
            if dangling is not None:
                message["unparsed_tool_calls"] = [*message.get("unparsed_tool_calls", []), dangling]
                break
        parts = parse_think_blocks(before)
        message["content"] = parts if parts is not None else before

    def create_conversation_prefix_with_tools(
        self, tools: list[ToolSpec], system_prompt: str = ""
    ) -> list[Message]:
        """A `tool_declare` message, then the system message (the default one when
        `system_prompt` is empty)."""
        messages: list[Message] = []
        if tools:
            payload = [{"type": "function", "function": tool} for tool in tools]
            messages.append(Message(role="tool_declare", content=self._declare_tools(payload)))
        messages.append(Message(role="system", content=system_prompt or self.DEFAULT_SYSTEM_PROMPT))
        return messages

    def _declare_tools(self, tools: list[dict[str, Any]]) -> str:
        """OpenAI-layout tools as K2's template writes them: compact JSON, keys sorted."""
        return json.dumps(tools, separators=(",", ":"), sort_keys=True)
