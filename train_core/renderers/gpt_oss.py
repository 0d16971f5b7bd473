"""gpt-oss renderers (OpenAI Harmony): `gpt_oss_no_sysprompt`, `gpt_oss_{low,medium,high}_reasoning`.

Wire format `<|start|>{role}<|channel|>{channel}<|message|>{content}<|end|>`, no newlines between
messages. An assistant turn writes its reasoning to the `analysis` channel, its answer to
`final` (ending in `<|return|>` when it is the last message), and tool calls to `commentary`
addressed `to=functions.NAME` (ending in `<|call|>`). System messages become `developer` ones.
"""

from __future__ import annotations

import json
import re
import warnings
from datetime import datetime

import tinker

from train_core.renderers.base import Renderer
from train_core.renderers.content import (
    UNTERMINATED_TOOL_BLOCK_ERROR,
    ensure_list,
    ensure_text,
    reject_media,
)
from train_core.renderers.gpt_oss_tools import format_tools_namespace
from train_core.renderers.types import (
    ContentPart,
    Message,
    ParseTermination,
    RenderContext,
    RenderedMessage,
    RendererError,
    TextPart,
    ThinkingPart,
    Tokenizer,
    ToolCall,
    ToolSpec,
    UnparsedToolCall,
)

_END_MARKERS = ("<|end|>", "<|call|>", "<|return|>")


class GptOssRenderer(Renderer):
    """Harmony. use_system_prompt adds OpenAI's system message (and needs reasoning_effort);
    current_date fixes its date (default: today), for reproducible prompts."""

    system_prompt_content = (
        "You are ChatGPT, a large language model trained by OpenAI.\n"
        "Knowledge cutoff: 2024-06\n"
        "Current date: {current_date}\n\n"
        "Reasoning: {reasoning_effort}\n\n"
        "# Valid channels: analysis, commentary, final. Channel must be included for every message."
    )
    reasoning_content_field = True

    # Renders as a real "system" message; a user's "system" becomes "developer".
    _INTERNAL_SYSTEM_ROLE = "_gptoss_internal_system"

    def __init__(
        self,
        tokenizer: Tokenizer,
        use_system_prompt: bool = False,
        reasoning_effort: str | None = None,
        current_date: str | None = None,
    ) -> None:
        super().__init__(tokenizer)
        if use_system_prompt != (reasoning_effort is not None):
            raise RendererError(
                "gpt-oss: reasoning_effort is set exactly when use_system_prompt is true "
                f"(got use_system_prompt={use_system_prompt}, reasoning_effort={reasoning_effort!r})"
            )
        self.use_system_prompt = use_system_prompt
        self.reasoning_effort = reasoning_effort
        self.current_date = current_date

    def _encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def _single_token(self, text: str) -> int:
        tokens = self._encode(text)
        if len(tokens) != 1:
            raise RendererError(f"{text} must be one token in this tokenizer, got {tokens}")
        return tokens[0]

    def render_message(self, message: Message, ctx: RenderContext) -> RenderedMessage:
        role = message["role"]
        if role == "tool":
            return self._render_tool_result(message)
        wire_role = {self._INTERNAL_SYSTEM_ROLE: "system", "system": "developer"}.get(role, role)
        header = f"<|start|>{wire_role}"
        calls: list[ToolCall] = []
        if role == "assistant":
            reject_media(message["content"], type(self).__name__)
            parts = ensure_list(message["content"])
            text = "".join(p["text"] for p in parts if p["type"] == "text")
            thinking = "".join(p["thinking"] for p in parts if p["type"] == "thinking")
            calls = message.get("tool_calls") or []
            body = ""
            if thinking:
                body += f"<|channel|>analysis<|message|>{thinking}<|end|><|start|>assistant"
            if calls:
                if text:  # a visible preamble before the calls
                    body += f"<|channel|>commentary<|message|>{text}<|end|><|start|>assistant"
                body += self._render_tool_calls(calls)  # each call ends in <|call|>
            else:
                body += f"<|channel|>final<|message|>{text}"
                body += "<|return|>" if ctx.is_last else "<|end|>"
        elif role == "system":
            body = f"<|message|># Instructions\n\n{ensure_text(message['content'])}\n\n<|end|>"
        else:
            body = f"<|message|>{ensure_text(message['content'])}<|end|>"
        return RenderedMessage(
            header=tinker.EncodedTextChunk(tokens=self._encode(header)),
            output=[tinker.EncodedTextChunk(tokens=self._encode(body))],
        )

    @staticmethod
    def _render_tool_calls(calls: list[ToolCall]) -> str:
        return "<|start|>assistant".join(
            f" to=functions.{tc.function.name}<|channel|>commentary <|constrain|>json<|message|>"
            f"{tc.function.arguments}<|call|>"
            for tc in calls
        )

    def _render_tool_result(self, message: Message) -> RenderedMessage:
        """`<|start|>functions.NAME to=assistant<|channel|>commentary<|message|>{result}<|end|>`.

        Harmony addresses results by function name, so tool messages need "name".
        """
        name = message.get("name", "")
        if not name:
            warnings.warn(
                "gpt-oss tool message has no 'name'; writing functions.unknown (set 'name' to "
                "the function that was called)",
                UserWarning,
                stacklevel=3,
            )
            name = "unknown"
        if not name.startswith("functions."):
            name = f"functions.{name}"
        body = f"<|channel|>commentary<|message|>{ensure_text(message['content'])}<|end|>"
        return RenderedMessage(
            header=tinker.EncodedTextChunk(tokens=self._encode(f"<|start|>{name} to=assistant")),
            output=[tinker.EncodedTextChunk(tokens=self._encode(body))],
        )

    def _system_message(self) -> Message | None:
        if not self.use_system_prompt:
            return None
        date = self.current_date
        if date is None:
            date = datetime.now().strftime("%Y-%m-%d")
        content = self.system_prompt_content.format(
            current_date=date, reasoning_effort=self.reasoning_effort
        )
        return Message(role=self._INTERNAL_SYSTEM_ROLE, content=content)

    def _prepare_conversation(self, messages: list[Message]) -> list[Message]:
        system = self._system_message()
        if system is None:
            return messages
        if messages and messages[0]["role"] == "system":
            warnings.warn(
                "gpt-oss with use_system_prompt=True got a conversation that starts with a "
                "system message; both will be rendered",
                UserWarning,
                stacklevel=3,
            )
        return [system, *messages]

    @property
    def _return_token(self) -> int:
        return self._single_token("<|return|>")

    @property
    def _call_token(self) -> int:
        return self._single_token("<|call|>")

    def get_stop_sequences(self) -> list[int]:
        return [self._return_token, self._call_token]

    def parse_response(self, response: list[int]) -> tuple[Message, ParseTermination]:
        """Cut at the first `<|return|>` or `<|call|>`; `analysis` becomes ThinkingParts,
        `final`/`commentary` text, and `to=functions.X` messages tool calls."""
        call, ret = self._call_token, self._return_token
        n_call, n_return = response.count(call), response.count(ret)
        if n_call == 0 and n_return == 0:
            text = str(self.tokenizer.decode(response))
            return Message(role="assistant", content=text), ParseTermination.MALFORMED
        if n_call > 1 or n_return > 1:
            raise RendererError(
                f"gpt-oss response holds {n_call} <|call|> and {n_return} <|return|> tokens; "
                "expected at most one: sample with get_stop_sequences()"
            )
        stop = min(response.index(t) for t in (call, ret) if t in response)
        text = str(self.tokenizer.decode(response[:stop]))
        parts, calls, unparsed = _parse_harmony(text)
        if text.count("to=functions.") > len(calls) + len(unparsed):
            start = text.rfind("<|start|>")
            unparsed.append(
                UnparsedToolCall(
                    raw_text=text[start:] if start != -1 else text,
                    error=(
                        f"{UNTERMINATED_TOOL_BLOCK_ERROR}: 'to=functions.' tool-call header "
                        "without a parsable arguments payload"
                    ),
                )
            )
        message: Message = {"role": "assistant", "content": parts if parts else text}
        if calls:
            message["tool_calls"] = calls
        if unparsed:
            message["unparsed_tool_calls"] = unparsed
        return message, ParseTermination.STOP_SEQUENCE

    def create_conversation_prefix_with_tools(
        self, tools: list[ToolSpec], system_prompt: str = ""
    ) -> list[Message]:
        """With tools: a system message routing calls to `functions`, then a developer message
        with the instructions and the TypeScript-style tool namespace."""
        messages: list[Message] = []
        if tools:
            messages.append(
                Message(
                    role=self._INTERNAL_SYSTEM_ROLE,
                    content="Calls to these tools must go to the commentary channel: 'functions'.",
                )
            )
        sections = [f"# Instructions\n\n{system_prompt}"] if system_prompt else []
        if tools:
            sections.append(format_tools_namespace(tools))
        if sections:
            messages.append(Message(role="developer", content="\n\n".join(sections)))
        return messages


def _parse_harmony(text: str) -> tuple[list[ContentPart], list[ToolCall], list[UnparsedToolCall]]:
    parts: list[ContentPart] = []
    calls: list[ToolCall] = []
    unparsed: list[UnparsedToolCall] = []
    for header, body, raw in _harmony_messages(text):
        if not body.strip():
            continue
        recipient = re.search(r"to=([^\s<]+)", header)
        if recipient and recipient.group(1).startswith("functions."):
            name = recipient.group(1).split("functions.", 1)[1]
            try:
                json.loads(body)
            except json.JSONDecodeError as e:
                unparsed.append(UnparsedToolCall(raw_text=raw, error=f"Invalid JSON: {e}"))
                continue
            calls.append(
                ToolCall(function=ToolCall.FunctionBody(name=name, arguments=body.strip()))
            )
            continue
        channel = re.search(r"<\|channel\|>([^<\s]+)", header)
        if channel and channel.group(1) == "analysis":
            parts.append(ThinkingPart(type="thinking", thinking=body))
        elif channel and channel.group(1) in ("final", "commentary"):
            parts.append(TextPart(type="text", text=body))
    return parts, calls, unparsed


def _harmony_messages(text: str) -> list[tuple[str, str, str]]:
    """(header, body, raw text) of each `...<|message|>body<|end|>` in the decoded reply.

    Plain string search, not regexes over the whole reply: a message ends at the first end
    marker after its `<|message|>`, or at the end of the text.
    """
    found: list[tuple[str, str, str]] = []
    pos = 0
    while (message_at := text.find("<|message|>", pos)) != -1:
        header_at = text.rfind("<|start|>", pos, message_at)
        if header_at == -1:
            header_at = pos
        body_at = message_at + len("<|message|>")
        end_at, end_marker = len(text), ""
        for marker in _END_MARKERS:
            at = text.find(marker, body_at)
            if at != -1 and at < end_at:
                end_at, end_marker = at, marker
        raw_end = end_at + len(end_marker) if end_marker else len(text)
        found.append((text[header_at:message_at], text[body_at:end_at], text[header_at:raw_end]))
        pos = end_at + len(end_marker)
    return found
