"""DeepSeek V4.1's tool calling: the tools section of the system turn, and DSML call blocks.

    <｜DSML｜ calls>
    <｜DSML｜ invoke name="get_weather">
    <｜DSML｜ parameter name="city" string="true">Paris</｜DSML｜ parameter>
    <｜DSML｜ parameter name="days" string="false">2</｜DSML｜ parameter>
    </｜DSML｜ invoke>
    </｜DSML｜ calls>

One `parameter` per argument key: strings are written as they are (`string="true"`), every
other value as JSON. The block follows the answer after a blank line and ends the reply.
"""

from __future__ import annotations

import json
import re
from typing import Any

from train_core.renderers.content import detect_unterminated_tool_block
from train_core.renderers.types import ToolCall, UnparsedToolCall

# The model was trained on this exact text (it is the chat template's), so it is kept verbatim.
_TOOLS_SECTION = """## Tools

You have access to a set of tools to help answer the user's question. You can invoke tools by writing a "<｜DSML｜ calls>" block like the following:

<｜DSML｜ calls>
<｜DSML｜ invoke name="$TOOL_NAME">
<｜DSML｜ parameter name="$PARAMETER_NAME" string="true|false">$PARAMETER_VALUE</｜DSML｜ parameter>
...
</｜DSML｜ invoke>
<｜DSML｜ invoke name="$TOOL_NAME2">
...
</｜DSML｜ invoke>
</｜DSML｜ calls>

String parameters should be specified as is and set `string="true"`. For all other types (numbers, booleans, arrays, objects), pass the value in JSON format and set `string="false"`.

If thinking_mode is enabled (triggered by <think>), you MUST output your complete reasoning inside <think>...</think> BEFORE any tool calls or final response.

Otherwise, output directly after </think> with tool calls or final response.

### Available Tool Schemas

{schemas}

You MUST strictly follow the above defined tool name and parameter schemas to invoke tool calls.
"""

CALLS_OPEN = "<｜DSML｜ calls>"
CALLS_CLOSE = "</｜DSML｜ calls>"
_MARKER = "｜DSML｜"
_BLOCK_RE = re.compile(r"(?:\n\n)?<｜DSML｜ calls>.*?</｜DSML｜ calls>", re.DOTALL)
_INVOKE_RE = re.compile(r'<｜DSML｜ invoke name="(.*?)">\n(.*?)</｜DSML｜ invoke>', re.DOTALL)
_PARAMETER_RE = re.compile(
    r'<｜DSML｜ parameter name="(.*?)" string="(true|false)">(.*?)</｜DSML｜ parameter>', re.DOTALL
)


def tools_section(functions: list[dict[str, Any]]) -> str:
    """The system turn's tools section: instructions, then one JSON schema per line."""
    schemas = "\n".join(json.dumps(f, ensure_ascii=False) for f in functions)
    return _TOOLS_SECTION.format(schemas=schemas)


def arguments_dict(arguments: str) -> dict[str, Any]:
    """A call's JSON arguments as a dict; double-encoded JSON is unwrapped (as DeepSeek's own
    encoder does), and anything that is not an object becomes `{"arguments": <the string>}`."""
    value: Any = arguments
    for _ in range(2):
        if not isinstance(value, str):
            break
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            break
    return value if isinstance(value, dict) else {"arguments": arguments}


def _parameter(key: str, value: Any) -> str:
    if isinstance(value, str):
        return f'<｜DSML｜ parameter name="{key}" string="true">{value}</｜DSML｜ parameter>'
    written = json.dumps(value, ensure_ascii=False)
    return f'<｜DSML｜ parameter name="{key}" string="false">{written}</｜DSML｜ parameter>'


def write_tool_calls(tool_calls: list[ToolCall]) -> str:
    """The calls block, with the blank line that separates it from the answer."""
    invokes = [
        f'<｜DSML｜ invoke name="{tc.function.name}">\n'
        + "\n".join(_parameter(k, v) for k, v in arguments_dict(tc.function.arguments).items())
        + "\n</｜DSML｜ invoke>"
        for tc in tool_calls
    ]
    return f"\n\n{CALLS_OPEN}\n" + "\n".join(invokes) + f"\n{CALLS_CLOSE}"


def _invoke_arguments(params_text: str) -> dict[str, Any]:
    """An invoke's parameters as arguments; ValueError (JSONDecodeError is one) when malformed."""
    if _PARAMETER_RE.sub("", params_text).strip():
        raise ValueError("text outside parameters")
    arguments: dict[str, Any] = {}
    for key, is_string, value in _PARAMETER_RE.findall(params_text):
        if not key.strip():
            raise ValueError("empty parameter name")
        if key in arguments:
            raise ValueError(f"duplicate parameter {key!r}")
        arguments[key] = value if is_string == "true" else json.loads(value)
    return arguments


def _read_block(block: str) -> tuple[list[ToolCall], list[UnparsedToolCall]]:
    body = block.removeprefix("\n\n").removeprefix(CALLS_OPEN).removesuffix(CALLS_CLOSE)
    invokes = list(_INVOKE_RE.finditer(body))
    if not invokes or _INVOKE_RE.sub("", body).strip():
        return [], [UnparsedToolCall(raw_text=block, error="Invalid DSML: malformed invoke")]
    calls: list[ToolCall] = []
    unparsed: list[UnparsedToolCall] = []
    for invoke in invokes:
        name = invoke.group(1)
        try:
            if not name.strip():
                raise ValueError("empty function name")
            arguments = _invoke_arguments(invoke.group(2))
        except ValueError as e:
            unparsed.append(UnparsedToolCall(raw_text=invoke.group(0), error=f"Invalid DSML: {e}"))
            continue
        body_json = json.dumps(arguments)
        calls.append(ToolCall(function=ToolCall.FunctionBody(name=name, arguments=body_json)))
    return calls, unparsed


def split_tool_calls(text: str) -> tuple[str, list[ToolCall], list[UnparsedToolCall]]:
    """(text before the calls block, parsed calls, calls that did not parse).

    The block must end the reply, and the DSML marker appears nowhere else: text after the
    block, an unclosed block or a stray marker each become an UnparsedToolCall.
    """
    calls: list[ToolCall] = []
    unparsed: list[UnparsedToolCall] = []
    block = _BLOCK_RE.search(text)
    if block:
        calls, unparsed = _read_block(block.group(0))
        after = text[block.end() :]
        if after.strip():
            unparsed.append(
                UnparsedToolCall(raw_text=after, error="Invalid DSML: output after calls block")
            )
        text = text[: block.start()]
    dangling = detect_unterminated_tool_block(text, CALLS_OPEN, CALLS_CLOSE)
    if dangling is None and _MARKER in text:
        dangling = UnparsedToolCall(
            raw_text=text, error="Invalid DSML: marker outside a calls block"
        )
    if dangling is not None:
        unparsed.append(dangling)
    return text, calls, unparsed
