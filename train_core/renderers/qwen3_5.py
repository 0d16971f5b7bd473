"""Qwen3.5 / 3.6 renderers: `qwen3_5`, `qwen3_5_disable_thinking`, `qwen3_5_preserve_thinking`.

Qwen3-VL's turn layout with the Qwen3.5 template's changes:
- tool calls are XML, `<tool_call>\\n<function=NAME>\\n<parameter=ARG>\\nVALUE\\n</parameter>\\n
  </function>\\n</tool_call>`, and tools are declared as JSON lines followed by that format;
- content is trimmed; reasoning is framed `<think>\\n...\\n</think>\\n\\n`, and an assistant turn
  after the last user message that did not reason gets an empty `<think>\\n\\n</think>\\n\\n`;
- the generation prompt prefills `<think>\\n` (thinking on) or the closed empty block (off);
- consecutive tool results share one user turn.
"""

from __future__ import annotations

import json
import re

from train_core.renderers.content import UNTERMINATED_TOOL_BLOCK_ERROR, has_thinking
from train_core.renderers.qwen3_vl import Qwen3VLRenderer
from train_core.renderers.types import (
    Content,
    ContentPart,
    Message,
    RenderContext,
    RenderedMessage,
    Role,
    TextPart,
    ToolCall,
    ToolSpec,
    UnparsedToolCall,
)

_FUNCTION_RE = re.compile(
    r"^\s*<tool_call>\s*<function=(?P<name>[^>\n]+)>\s*(?P<body>.*?)\s*</function>\s*"
    r"</tool_call>\s*$",
    re.DOTALL,
)
_PARAMETER_RE = re.compile(
    r"<parameter=(?P<name>[^>\n]+)>\s*(?P<value>.*?)\s*</parameter>", re.DOTALL
)

XML_CALL_FORMAT = (
    "If you choose to call a function ONLY reply in the following format with NO suffix:\n\n"
    "<tool_call>\n<function=example_function_name>\n<parameter=example_parameter_1>\nvalue_1\n"
    "</parameter>\n<parameter=example_parameter_2>\nThis is the value for the second parameter\n"
    "that can span\nmultiple lines\n</parameter>\n</function>\n</tool_call>\n\n"
    "<IMPORTANT>\nReminder:\n- Function calls MUST follow the specified format: an inner "
    "<function=...></function> block must be nested within <tool_call></tool_call> XML tags\n"
    "- Required parameters MUST be specified\n- You may provide optional reasoning for your "
    "function call in natural language BEFORE the function call, but NOT after\n- If there is "
    "no function call available, answer the question like normal with your current knowledge "
    "and do not tell the user about function calls\n</IMPORTANT>"
)
"""The calling instructions after the declared tools (shared with Nemotron 3's template)."""


def trim_visible(content: list[ContentPart]) -> list[ContentPart]:
    """The template's `content|trim` on a part list: strip the visible text at both ends,
    looking past parts that strip to nothing and never into thinking."""
    parts = list(content)
    visible = [i for i, p in enumerate(parts) if p["type"] != "thinking"]
    for order, strip in ((visible, str.lstrip), (visible[::-1], str.rstrip)):
        for i in order:
            part = parts[i]
            if part["type"] != "text":
                break
            parts[i] = TextPart(type="text", text=strip(part["text"]))
            if parts[i]["text"]:  # type: ignore[typeddict-item]
                break
    return parts


def parse_xml_tool_call(raw_text: str) -> ToolCall | UnparsedToolCall:
    """A `<tool_call><function=..>` block as a ToolCall; parameter values are JSON when they
    parse as JSON, else the raw string."""
    match = _FUNCTION_RE.match(raw_text)
    if match is None:
        return UnparsedToolCall(raw_text=raw_text, error="Malformed Qwen3.5 tool call XML")
    name, body = match.group("name").strip(), match.group("body")
    if not name:
        return UnparsedToolCall(raw_text=raw_text, error="Missing function name")
    arguments: dict[str, object] = {}
    pos = 0
    for param in _PARAMETER_RE.finditer(body):
        if body[pos : param.start()].strip():
            return UnparsedToolCall(
                raw_text=raw_text, error="Unexpected non-parameter content inside <function> block"
            )
        param_name, value_text = param.group("name").strip(), param.group("value").strip("\n")
        if not param_name:
            return UnparsedToolCall(raw_text=raw_text, error="Empty parameter name")
        try:
            arguments[param_name] = json.loads(value_text)
        except json.JSONDecodeError:
            arguments[param_name] = value_text
        pos = param.end()
    if body[pos:].strip():
        return UnparsedToolCall(
            raw_text=raw_text, error="Unexpected trailing content inside <function> block"
        )
    return ToolCall(function=ToolCall.FunctionBody(name=name, arguments=json.dumps(arguments)))


class Qwen3_5Renderer(Qwen3VLRenderer):
    """Qwen3.5 / 3.6. thinking=False closes the think block in the generation prompt;
    strip_thinking_from_history=False keeps earlier turns' reasoning (`..._preserve_thinking`)."""

    groups_tool_responses = True

    def _set_thinking(self, thinking: bool) -> None:
        # The model always reasons in a think block; thinking=False closes it in the prompt.
        self.disables_thinking = not thinking

    @property
    def has_extension_property(self) -> bool:
        # A turn that did not reason is sampled after the open `<think>\n` (so its tokens go
        # on with a lone "\n"), while history writes the closed empty block whose "\n\n" is one
        # token: the sampled tokens are never a prefix of the next prompt.
        return False

    def _trim(self, content: Content) -> Content:
        return content.strip() if isinstance(content, str) else trim_visible(content)

    def render_message(self, message: Message, ctx: RenderContext) -> RenderedMessage:
        return super().render_message({**message, "content": self._trim(message["content"])}, ctx)

    def _thinking_text(self, thinking: str) -> str:
        return f"<think>\n{thinking}\n</think>\n\n"

    def _assistant_header_suffix(self, message: Message, ctx: RenderContext) -> str:
        if ctx.idx <= ctx.last_user_index or has_thinking(message["content"]):
            return ""
        return "<think>\n\n</think>\n\n"

    def _think_prefill(self, in_prompt: bool) -> str:
        """The think-block text the generation prompt ends with (in_prompt=False: the part of
        the produced turn's header that counts as prompt)."""
        return "<think>\n\n</think>\n\n" if self.disables_thinking else "<think>\n"

    def _prompt_prefill_text(self, role: Role, ctx: RenderContext) -> str:
        return super()._prompt_prefill_text(role, ctx) + self._think_prefill(in_prompt=True)

    def _prefill_in_header(self, message: Message, ctx: RenderContext) -> str:
        if message["role"] != "assistant" or not ctx.is_last:
            return ""
        return super()._prompt_prefill_text("assistant", ctx) + self._think_prefill(False)

    def _format_argument(self, value: object) -> str:
        # The Qwen3.5 template writes scalars with `|string` (Python's True / None).
        return json.dumps(value) if isinstance(value, dict | list) else str(value)

    def _xml_tool_call(self, tool_call: ToolCall) -> str:
        arguments = json.loads(tool_call.function.arguments) if tool_call.function.arguments else {}
        lines = [f"<tool_call>\n<function={tool_call.function.name}>"]
        lines += [
            f"<parameter={name}>\n{self._format_argument(value)}\n</parameter>"
            for name, value in arguments.items()
        ]
        return "\n".join([*lines, "</function>\n</tool_call>"])

    def _tool_calls_text(self, message: Message) -> str:
        # A blank line before the first call only when the message shows text (or an image).
        content = message["content"]
        if isinstance(content, str):
            visible = bool(content.strip())
        else:
            visible = any(
                (p["type"] == "text" and p["text"].strip()) or p["type"] == "image" for p in content
            )
        calls = "\n".join(self._xml_tool_call(tc) for tc in message.get("tool_calls", []))
        return ("\n\n" if visible else "") + calls

    def _normalize_response_tokens(self, response: list[int]) -> list[int]:
        """Put back the prefilled `<think>\\n` when the reply closes a think block it did not open."""
        prefill = list(self.tokenizer.encode("<think>\n", add_special_tokens=False))
        (close,) = self.tokenizer.encode("</think>", add_special_tokens=False)
        if response[: len(prefill)] != prefill and close in response:
            return prefill + response
        return response

    def _parse_reply_text(self, message: Message, text: str) -> None:
        """Qwen3's parse, then: trimmed reasoning, and XML tool calls (which Qwen3's JSON
        parser left unparsed) converted."""
        super()._parse_reply_text(message, text)
        # The separator after `</think>` was already dropped with the frame's newlines.
        for part in message["content"] if isinstance(message["content"], list) else []:
            if part["type"] == "thinking":
                part["thinking"] = part["thinking"].strip()  # the template's `|trim`
        converted: list[ToolCall] = []
        unparsed: list[UnparsedToolCall] = []
        for call in message.get("unparsed_tool_calls", []):
            # An unterminated block keeps its own, more useful error.
            if (
                call.error.startswith(UNTERMINATED_TOOL_BLOCK_ERROR)
                or "<function=" not in call.raw_text
            ):
                unparsed.append(call)
                continue
            parsed = parse_xml_tool_call(call.raw_text)
            (converted if isinstance(parsed, ToolCall) else unparsed).append(parsed)  # type: ignore[arg-type]
        if converted:
            message["tool_calls"] = [*message.get("tool_calls", []), *converted]
        if unparsed:
            message["unparsed_tool_calls"] = unparsed
        else:
            message.pop("unparsed_tool_calls", None)

    def _tools_system_content(self, tools_text: str, system_prompt: str) -> str:
        # Qwen3.5 puts the tools before the system prompt.
        return f"{tools_text}\n\n{system_prompt}" if system_prompt else tools_text

    def _tool_declarations(self, tools: list[ToolSpec]) -> str:
        return "\n".join(json.dumps(tool) for tool in tools)

    def create_conversation_prefix_with_tools(
        self, tools: list[ToolSpec], system_prompt: str = ""
    ) -> list[Message]:
        """One system message: the `# Tools` block (declarations, then the XML call format)
        and the system prompt, in the template's order."""
        if not tools:
            return [Message(role="system", content=system_prompt)]
        tools_text = (
            "# Tools\n\nYou have access to the following functions:\n\n"
            f"<tools>\n{self._tool_declarations(tools)}\n</tools>\n\n{XML_CALL_FORMAT}"
        )
        return [
            Message(role="system", content=self._tools_system_content(tools_text, system_prompt))
        ]
