"""`glm5_3_max_reasoning`, `glm5_3_high_reasoning`, `glm5_3_low_reasoning`: Z.ai's GLM-5.3.

    [gMASK]<sop><|system|>Reasoning Effort: Max<|system|>{system}<|user|>{question}
    <|assistant|><think>{reasoning}</think>{answer}<|user|>

(one line in reality). The effort segment is always there; thinking cannot be turned off, so
every generation prompt ends in `<|assistant|><think>` and that prefill sits in the zero-weight
header of every assistant message. There is no end-of-message token: a reply ends with the next
turn's role token, `<|user|>` or, after tool calls, `<|observation|>` (or `<|endoftext|>`). The
model must learn to produce it, so an assistant message owns that token as its last output token
and the next message's header leaves it out; after the last message it is the stop overlap (a
token the Hugging Face template, which stops after the content, does not write). Answers are
stripped of surrounding whitespace. Earlier reasoning is kept (the template's clear_thinking
is off by default). Tool calls and declarations are in glm_tool_calls.py; consecutive tool
results share one `<|observation|>` and are put in call order when their ids say it exactly.
"""

from __future__ import annotations

from typing import Any, Literal

import tinker

from train_core.renderers.base import ThinkingHistoryRenderer, single_token
from train_core.renderers.glm_tool_calls import (
    call_arguments,
    split_content,
    tools_message,
    write_tool_call,
)
from train_core.renderers.types import (
    Content,
    Message,
    ParseTermination,
    RenderContext,
    RenderedMessage,
    RendererError,
    Role,
    Tokenizer,
    ToolSpec,
)

ReasoningEffort = Literal["low", "high", "max"]


def _text_only(content: Content) -> str:
    if isinstance(content, str):
        return content
    for part in content:
        if part["type"] != "text":
            raise RendererError(f"GLM-5.3 renders text parts here, got a {part['type']!r} part")
    return "".join(p["text"] for p in content if p["type"] == "text")


def _reasoning_and_answer(message: Message) -> tuple[str | None, str]:
    """(reasoning or None when there is none, answer); a string is split at `</think>` as the
    template splits it."""
    content = message["content"]
    if isinstance(content, str):
        if "</think>" not in content:
            return None, content
        return content.split("</think>")[0].split("<think>")[-1], content.split("</think>")[-1]
    for part in content:
        if part["type"] not in ("text", "thinking"):
            raise RendererError(f"GLM-5.3 renders text and thinking parts, got {part['type']!r}")
    thoughts = [p["thinking"] for p in content if p["type"] == "thinking"]
    answer = "".join(p["text"] for p in content if p["type"] == "text")
    return ("".join(thoughts) if thoughts else None), answer


def _in_call_order(results: list[Message], caller: Message | None) -> list[Message]:
    """A run of tool results in the order of the calls, when ids match them one to one.

    Calls and results must each have distinct, non-empty ids and every result must answer one
    of the calls (results may answer only some); otherwise the run keeps its order.
    """
    if caller is None or caller["role"] != "assistant" or not caller.get("tool_calls"):
        return results
    call_ids = [c.id for c in caller.get("tool_calls", [])]
    result_ids = [m.get("tool_call_id") for m in results]
    for ids in (call_ids, result_ids):
        if not all(ids) or len(set(ids)) != len(ids):
            return results
    if not set(result_ids) <= set(call_ids):
        return results
    by_id = dict(zip(result_ids, results, strict=True))
    return [by_id[i] for i in call_ids if i in by_id]


def _sort_tool_results(messages: list[Message]) -> list[Message]:
    out: list[Message] = []
    idx = 0
    while idx < len(messages):
        end = idx
        while end < len(messages) and messages[end]["role"] == "tool":
            end += 1
        if end == idx:
            out.append(messages[idx])
            idx += 1
            continue
        out.extend(_in_call_order(messages[idx:end], messages[idx - 1] if idx else None))
        idx = end
    return out


class Glm5_3Renderer(ThinkingHistoryRenderer):
    """GLM-5.3 at a reasoning effort (the template's default is max).
    strip_thinking_from_history=True empties reasoning at or before the last user message
    (the template's clear_thinking). Keeping it gives the extension property only for answers
    without surrounding whitespace, which the template strips."""

    reasoning_content_field = True

    def __init__(
        self,
        tokenizer: Tokenizer,
        reasoning_effort: ReasoningEffort = "max",
        strip_thinking_from_history: bool = False,
    ) -> None:
        super().__init__(tokenizer, strip_thinking_from_history)
        self.reasoning_effort = reasoning_effort
        self._role_tokens = {
            role: single_token(tokenizer, f"<|{marker}|>")
            for role, marker in (
                ("system", "system"),
                ("user", "user"),
                ("assistant", "assistant"),
                ("tool", "observation"),
            )
        }
        self._end_of_text = single_token(tokenizer, "<|endoftext|>")
        self._think_open = single_token(tokenizer, "<think>")
        self._think_close = single_token(tokenizer, "</think>")

    def _encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    @property
    def _bos_tokens(self) -> list[int]:
        effort = self.reasoning_effort.capitalize()
        return self._encode(f"[gMASK]<sop><|system|>Reasoning Effort: {effort}")

    def get_stop_sequences(self) -> list[int]:
        return [self._role_tokens["user"], self._role_tokens["tool"], self._end_of_text]

    def _turn_end_token(self, message: Message, next_message: Message | None) -> int | None:
        """The role token that ends this assistant message, when the model is the one to write
        it: `<|observation|>` after tool calls, else `<|user|>`. None when the next message
        opens with some other role token (a system message, a tool result after no call)."""
        end = self._role_tokens["tool" if message.get("tool_calls") else "user"]
        if next_message is None:
            return end
        return end if self._role_tokens.get(next_message["role"]) == end else None

    def _role_token_written_by_previous(self, ctx: RenderContext, message: Message) -> bool:
        prev = ctx.prev_message
        if prev is None or prev["role"] != "assistant":
            return False
        return self._turn_end_token(prev, message) is not None

    def render_message(self, message: Message, ctx: RenderContext) -> RenderedMessage:
        role = message["role"]
        if role == "assistant":
            return self._render_assistant(message, ctx)
        if role == "system":
            header = [self._role_tokens["system"]]
            body = _text_only(message["content"])
        elif role == "user":
            written = self._role_token_written_by_previous(ctx, message)
            header = [] if written else [self._role_tokens["user"]]
            body = _text_only(message["content"])
        elif role == "tool":
            shares_observation = ctx.prev_message is not None and (
                ctx.prev_message["role"] == "tool"
                or self._role_token_written_by_previous(ctx, message)
            )
            header = [] if shares_observation else [self._role_tokens["tool"]]
            body = f"<tool_response>{_text_only(message['content'])}</tool_response>"
        else:
            raise RendererError(
                f"GLM-5.3 has no role {role!r}; expected system, user, assistant or tool"
            )
        tokens = self._encode(body)
        return RenderedMessage(
            header=tinker.EncodedTextChunk(tokens=header) if header else None,
            output=[tinker.EncodedTextChunk(tokens=tokens)] if tokens else [],
        )

    def _render_assistant(self, message: Message, ctx: RenderContext) -> RenderedMessage:
        reasoning, answer = _reasoning_and_answer(message)
        keeps = not self.strip_thinking_from_history or ctx.idx > ctx.last_user_index
        # The prompt's <think> goes to the header; the rest of the think block is output.
        body = (reasoning if keeps and reasoning is not None else "") + "</think>" + answer.strip()
        body += "".join(write_tool_call(tc) for tc in message.get("tool_calls") or [])
        tokens = self._encode(body)
        end = self._turn_end_token(message, ctx.next_message)
        overlap = None
        if ctx.is_last:
            overlap = tinker.EncodedTextChunk(tokens=[end]) if end is not None else None
        elif end is not None:
            tokens.append(end)
        return RenderedMessage(
            header=tinker.EncodedTextChunk(
                tokens=[self._role_tokens["assistant"], *self._encode("<think>")]
            ),
            output=[tinker.EncodedTextChunk(tokens=tokens)] if tokens else [],
            stop_overlap=overlap,
        )

    def _get_generation_suffix(self, role: Role, ctx: RenderContext) -> list[int]:
        if role not in self._role_tokens:
            raise RendererError(f"GLM-5.3 cannot prompt for role {role!r}")
        think = self._encode("<think>") if role == "assistant" else []
        return [self._role_tokens[role], *think]

    def _prepare_conversation(self, messages: list[Message]) -> list[Message]:
        return _sort_tool_results(messages)

    def _normalize_response_tokens(self, response: list[int]) -> list[int]:
        """Put back the prefilled `<think>` when the sample closes a block it did not open."""
        if response and response[0] != self._think_open and self._think_close in response:
            return [self._think_open, *response]
        return response

    def parse_response(self, response: list[int]) -> tuple[Message, ParseTermination]:
        """Split at the one stop token (`<|endoftext|>` is EOS, the role tokens STOP_SEQUENCE);
        `<think>` blocks become ThinkingParts and `<tool_call>` blocks tool calls. Without a stop
        token the decoded text comes back, MALFORMED."""
        response = self._normalize_response_tokens(response)
        stops = set(self.get_stop_sequences())
        at = [i for i, token in enumerate(response) if token in stops]
        if not at:
            text = str(self.tokenizer.decode(response))
            return Message(role="assistant", content=text), ParseTermination.MALFORMED
        if len(at) > 1:
            raise RendererError(
                f"response holds {len(at)} stop tokens; expected at most 1: sample with this "
                "renderer's get_stop_sequences()"
            )
        eos = response[at[0]] == self._end_of_text
        termination = ParseTermination.EOS if eos else ParseTermination.STOP_SEQUENCE
        text = str(self.tokenizer.decode(response[: at[0]]))
        message = Message(role="assistant", content=text)
        split = split_content(text)
        if split is not None:
            message["content"], calls, unparsed = split
            if calls:
                message["tool_calls"] = calls
            if unparsed:
                message["unparsed_tool_calls"] = unparsed
        return message, termination

    def to_openai_message(self, message: Message) -> dict[str, Any]:
        """With `reasoning_content`, and arguments as dicts (the template iterates over them)."""
        result = super().to_openai_message(message)
        calls = message.get("tool_calls") or []
        for call, tool_call in zip(result.get("tool_calls", []), calls, strict=True):
            call["function"]["arguments"] = call_arguments(tool_call)
        return result

    def create_conversation_prefix_with_tools(
        self, tools: list[ToolSpec], system_prompt: str = ""
    ) -> list[Message]:
        """The tools system message (which the template puts first), then the system prompt."""
        messages: list[Message] = []
        if tools:
            messages.append(Message(role="system", content=tools_message(tools)))
        if system_prompt:
            messages.append(Message(role="system", content=system_prompt))
        return messages
