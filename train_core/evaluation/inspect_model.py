"""An inspect-ai model provider (a `ModelAPI`) answered by a Kitchen sampling client: inspect's
chat messages become renderer messages (tool calls and tool results included), the declared tools
go into the renderer's tool prefix, and each sampled answer is parsed back into an assistant
message with its tool calls, as tinker-cookbook 0.6.1's inspect provider does. Importing this
module imports inspect_ai; train_core.evaluation.inspect_evaluator imports it only when it runs."""

from __future__ import annotations

import json
import time
from typing import Any

from inspect_ai.model import (
    ChatCompletionChoice,
    ChatMessage,
    ChatMessageAssistant,
    ChatMessageSystem,
    ChatMessageTool,
    GenerateConfig,
    ModelAPI,
    ModelOutput,
    ModelUsage,
)
from inspect_ai.model._registry import modelapi_register
from inspect_ai.tool import ToolCall, ToolChoice, ToolFunction, ToolInfo
from tinker import types

from train_core.evaluation.labels import content_text
from train_core.futures import resolve_future
from train_core.renderers.types import ToolCall as RendererToolCall

# inspect passes max_tokens=None when a task sets none; the SDK needs a number (inspect's default)
DEFAULT_MAX_TOKENS = 2048


def to_renderer_message(message: ChatMessage) -> dict[str, Any]:
    """One inspect message as a renderer message: text content, tool calls as the renderer's
    ToolCall (arguments as JSON), a tool result's call id and function."""
    text = message.text if not isinstance(message.content, str) else message.content
    out: dict[str, Any] = {"role": message.role, "content": text.strip()}
    if isinstance(message, ChatMessageAssistant) and message.tool_calls:
        out["tool_calls"] = [
            RendererToolCall(id=call.id, function=RendererToolCall.FunctionBody(
                name=call.function, arguments=json.dumps(call.arguments, separators=(",", ":"))))
            for call in message.tool_calls
        ]  # fmt: skip
    if isinstance(message, ChatMessageTool):
        if message.tool_call_id is not None:
            out["tool_call_id"] = message.tool_call_id
        if message.function is not None:
            out["name"] = message.function
    return out


def tool_specs(tools: list[ToolInfo], choice: ToolChoice) -> list[dict[str, Any]]:
    """The tools the model is shown: none for tool_choice "none", the one a ToolFunction names."""
    if choice == "none":
        return []
    specs = [
        {"name": t.name, "description": t.description,
         "parameters": t.parameters.model_dump(exclude_none=True)}
        for t in tools
    ]  # fmt: skip
    if isinstance(choice, ToolFunction):
        specs = [s for s in specs if s["name"] == choice.name]
    return specs


def _field(obj: Any, name: str) -> Any:
    return obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)


def to_inspect_tool_calls(message: dict[str, Any], choice_index: int) -> list[ToolCall] | None:
    """A parsed answer's tool calls as inspect ToolCalls; arguments that are not a JSON object
    become a parse_error (inspect reports it to the model) rather than an exception."""
    calls: list[ToolCall] = []
    for i, call in enumerate(message.get("tool_calls") or []):
        function = _field(call, "function")
        raw = _field(function, "arguments") or "{}"
        error, arguments = None, {}
        try:
            decoded = json.loads(raw)
            arguments = decoded if isinstance(decoded, dict) else {}
            error = None if isinstance(decoded, dict) else "arguments are not a JSON object"
        except json.JSONDecodeError as e:
            error = str(e)
        calls.append(ToolCall(id=_field(call, "id") or f"call_{choice_index}_{i}",
                              function=_field(function, "name"), arguments=arguments,
                              parse_error=error))  # fmt: skip
    for i, bad in enumerate(message.get("unparsed_tool_calls") or []):
        calls.append(ToolCall(id=f"unparsed_call_{choice_index}_{i}", function="unparsed_tool_call",
                              arguments={"raw_text": _field(bad, "raw_text")},
                              parse_error=_field(bad, "error")))  # fmt: skip
    return calls or None


class KitchenModelAPI(ModelAPI):
    """inspect-ai's model API over `sampling_client` (anything with the SDK's `sample`) and the
    `renderer` of its model."""

    def __init__(self, sampling_client: Any, renderer: Any, model_name: str = "kitchen") -> None:
        super().__init__(model_name=model_name, api_key_vars=[], config=GenerateConfig())
        self.sampling_client, self.renderer = sampling_client, renderer

    async def generate(
        self,
        input: list[ChatMessage],
        tools: list[ToolInfo],
        tool_choice: ToolChoice,
        config: GenerateConfig,
    ) -> ModelOutput:
        if config.system_message:
            input = [ChatMessageSystem(content=config.system_message), *input]
        convo = [to_renderer_message(m) for m in input]
        specs = tool_specs(tools, tool_choice)
        if specs:  # the tool prefix replaces the system message, keeping its text
            has_system = bool(convo) and convo[0]["role"] == "system"
            system = convo[0]["content"] if has_system else ""
            rest = convo[1:] if has_system else convo
            convo = [*self.renderer.create_conversation_prefix_with_tools(specs, system), *rest]
        prompt = self.renderer.build_generation_prompt(convo)
        params = types.SamplingParams(
            temperature=1.0 if config.temperature is None else config.temperature,
            max_tokens=config.max_tokens or DEFAULT_MAX_TOKENS,
            stop=self.renderer.get_stop_sequences(),
            top_p=1.0 if config.top_p is None else config.top_p,
            top_k=-1 if config.top_k is None else config.top_k,
            seed=config.seed,
        )
        start = time.monotonic()
        n = config.num_choices or 1
        response = await resolve_future(self.sampling_client.sample(prompt, n, params))
        choices = []
        for index, seq in enumerate(response.sequences):
            parsed, _ = self.renderer.parse_response(seq.tokens)
            message = ChatMessageAssistant(
                content=content_text(parsed.get("content", "")), model=self.model_name,
                tool_calls=to_inspect_tool_calls(parsed, index),
            )  # fmt: skip
            choices.append(ChatCompletionChoice(
                message=message, stop_reason="tool_calls" if message.tool_calls else "stop"))  # fmt: skip
        prompt_tokens = len(prompt.to_ints())
        output_tokens = sum(len(s.tokens) for s in response.sequences)
        usage = ModelUsage(input_tokens=prompt_tokens, output_tokens=output_tokens,
                           total_tokens=prompt_tokens + output_tokens)  # fmt: skip
        return ModelOutput(model=self.model_name, choices=choices, usage=usage,
                           time=time.monotonic() - start)  # fmt: skip


# inspect names a model by its provider's registry entry ("kitchen/<model_name>" in its logs); the
# function form keeps __init__'s signature, which the @modelapi decorator would hide from mypy
modelapi_register(KitchenModelAPI, "kitchen")
