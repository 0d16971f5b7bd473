"""`chatml`: plain ChatML, for SmolLM2 Instruct and Kitchen's tiny models.

    <|im_start|>user
    What is 2+2?<|im_end|>
    <|im_start|>assistant
    4<|im_end|>

The newline between turns belongs to the next header (weight 0), so a trained reply ends at
`<|im_end|>`, which is the stop token.

Default system prompt: SmolLM2's Hugging Face template inserts "You are a helpful AI assistant
named SmolLM, trained by Hugging Face" when a conversation does not start with a system message.
`chatml` does NOT: it is one format for every ChatML tokenizer (the tiny models have no such
prompt), and it keeps CPU-sized sequences short. Conversations that start with a system message
render identically either way. `chatml_smollm2` inserts SmolLM2's prompt and so matches
`apply_chat_template` token for token (the generation prompt exactly; a full conversation up to
the template's trailing newline).

Thinking parts render inline as `<think>...</think>` and tool calls as Hermes-style
`<tool_call>{json}</tool_call>` blocks (the layout Qwen uses); both parse back.
"""

from __future__ import annotations

import json

import tinker

from train_core.renderers.base import Renderer, encode_without_special_tokens
from train_core.renderers.content import (
    detect_unterminated_tool_block,
    parse_content_blocks,
    parse_think_blocks,
    reject_media,
    tool_call_blocks,
)
from train_core.renderers.types import (
    ContentPart,
    Message,
    ParseTermination,
    RenderContext,
    RenderedMessage,
    RendererError,
    TextPart,
    Tokenizer,
    ToolCall,
    ToolSpec,
    UnparsedToolCall,
)

SMOLLM2_SYSTEM_PROMPT = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"


class ChatMLRenderer(Renderer):
    """ChatML turns; `default_system_prompt` is prepended when the conversation has no system message."""

    def __init__(self, tokenizer: Tokenizer, default_system_prompt: str | None = None) -> None:
        super().__init__(tokenizer)
        self.default_system_prompt = default_system_prompt

    @property
    def has_extension_property(self) -> bool:
        return True

    def _prepare_conversation(self, messages: list[Message]) -> list[Message]:
        # As SmolLM2's template: only a non-empty conversation gets the default.
        if self.default_system_prompt is None or not messages or messages[0]["role"] == "system":
            return messages
        return [Message(role="system", content=self.default_system_prompt), *messages]

    def render_message(self, message: Message, ctx: RenderContext) -> RenderedMessage:
        header = ("\n" if ctx.idx > 0 else "") + f"<|im_start|>{message['role']}\n"
        content = message["content"]
        reject_media(content, "chatml")
        if isinstance(content, str):
            body = content
        else:
            body = "".join(
                p["text"] if p["type"] == "text" else f"<think>{p['thinking']}</think>"
                for p in content
                if p["type"] in ("text", "thinking")
            )
        if message.get("tool_calls"):
            body += ("\n" if body else "") + tool_call_blocks(message["tool_calls"])
        return RenderedMessage(
            header=tinker.EncodedTextChunk(
                tokens=encode_without_special_tokens(self.tokenizer, header)
            ),
            output=[
                tinker.EncodedTextChunk(tokens=encode_without_special_tokens(self.tokenizer, body)),
                tinker.EncodedTextChunk(tokens=[self._end_message_token]),
            ],
        )

    @property
    def _end_message_token(self) -> int:
        tokens = encode_without_special_tokens(self.tokenizer, "<|im_end|>")
        if len(tokens) != 1:
            raise RendererError(
                f"chatml needs <|im_end|> to be one token, but this tokenizer gives {tokens}"
            )
        return tokens[0]

    def parse_response(self, response: list[int]) -> tuple[Message, ParseTermination]:
        """STOP_SEQUENCE when `<|im_end|>` ended the reply, EOS when the tokenizer's (different)
        EOS token did, MALFORMED when it was cut off. `<think>` blocks become ThinkingParts and
        `<tool_call>` blocks tool_calls."""
        end = self._end_message_token
        eos = self.tokenizer.eos_token_id
        count = response.count(end)
        if count > 1:
            raise RendererError(
                f"chatml response holds {count} <|im_end|> tokens; expected at most 1: "
                "sample with get_stop_sequences()"
            )
        if count == 1:
            termination = ParseTermination.STOP_SEQUENCE
            text = self._decode(response[: response.index(end)])
        elif eos is not None and response and response[-1] == eos:
            termination = ParseTermination.EOS
            text = self._decode(response[:-1])
        else:
            cut_off = Message(role="assistant", content=self._decode(response))
            return cut_off, ParseTermination.MALFORMED
        content, calls = _split_content_and_calls(text)
        message = Message(role="assistant", content=content)
        parsed = [c for c in calls if isinstance(c, ToolCall)]
        unparsed = [c for c in calls if isinstance(c, UnparsedToolCall)]
        dangling = detect_unterminated_tool_block(text, "<tool_call>", "</tool_call>")
        if dangling is not None:
            unparsed.append(dangling)
        if parsed:
            message["tool_calls"] = parsed
        if unparsed:
            message["unparsed_tool_calls"] = unparsed
        return message, termination

    def _decode(self, tokens: list[int]) -> str:
        return str(self.tokenizer.decode(tokens))

    def create_conversation_prefix_with_tools(
        self, tools: list[ToolSpec], system_prompt: str = ""
    ) -> list[Message]:
        """One system message: the prompt, then the tools as JSON lines in `<tools>` tags."""
        lines = "\n".join(json.dumps({"type": "function", "function": tool}) for tool in tools)
        tools_text = (
            "You may call functions. Their signatures are in <tools></tools> tags:\n"
            f"<tools>\n{lines}\n</tools>\n"
            "To call one, reply with a JSON object in <tool_call></tool_call> tags:\n"
            '<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>'
        )
        content = f"{system_prompt}\n\n{tools_text}" if system_prompt else tools_text
        return [Message(role="system", content=content)]


def _split_content_and_calls(
    text: str,
) -> tuple[str | list[ContentPart], list[ToolCall | UnparsedToolCall]]:
    """Invert the render: text (with `<think>` blocks) up to the first `<tool_call>`, then calls.

    The render writes one newline before the first call and between calls; those are framing,
    so they are dropped rather than returned as text.
    """
    before, _, calls_region = text.partition("<tool_call>")
    calls: list[ToolCall | UnparsedToolCall] = []
    trailing: list[ContentPart] = []
    if calls_region:
        before = before.removesuffix("\n")
        blocks = parse_content_blocks("<tool_call>" + calls_region)
        assert blocks is not None  # the region starts with <tool_call>
        extra_parts, calls = blocks
        trailing = [p for p in extra_parts if p["type"] != "text" or p["text"].strip()]
    parts = parse_think_blocks(before)
    if parts is None and not trailing:
        return before, calls
    if parts is None:
        parts = [TextPart(type="text", text=before)] if before else []
    return parts + trailing, calls
