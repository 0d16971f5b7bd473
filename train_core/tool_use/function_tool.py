"""`@tool`: a Tool from a typed Python function. The JSON schema comes from the signature (type
hints, defaults, and `Annotated[T, "description"]` or `Annotated[T, Field(...)]`), built as a
pydantic model named `<function>_params`, which is how tinker-cookbook 0.6.1 derives it, so the
schema a model sees is the same in both. Arguments are validated against that model before the
function runs; a call that fails validation or raises becomes an error message to the model,
never an exception in the rollout."""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Literal, get_args, get_origin, get_type_hints, overload

import pydantic
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from train_core.tool_use.types import ToolInput, ToolResult, text_result

CallErrorKind = Literal["unknown_tool", "json", "arguments", "execution"]


@dataclass(frozen=True)
class CallError:
    """Why a call produced no result: an unknown tool, arguments that are not a JSON object,
    arguments the schema rejects, or an exception in the tool."""

    kind: CallErrorKind
    detail: str


def json_error(error: CallError) -> str:
    """The default error content: `{"error": detail}`."""
    return json.dumps({"error": error.detail})


def _field(annotation: Any, default: Any) -> tuple[Any, FieldInfo]:
    """(type, FieldInfo) of one parameter: a FieldInfo inside `Annotated` is used as given (a
    signature default fills it when it has none), else the first string is the description."""
    if get_origin(annotation) is not Annotated:
        return annotation, pydantic.Field(default)
    base, *extras = get_args(annotation)
    info = next((e for e in extras if isinstance(e, FieldInfo)), None)
    text = next((e for e in extras if isinstance(e, str)), None)
    if info is None:
        return base, pydantic.Field(default, description=text)
    if info.default is PydanticUndefined and default is not ...:
        info.default = default
    return base, info


def parameters_model(fn: Callable[..., Any], model_name: str) -> type[pydantic.BaseModel]:
    """The pydantic model of `fn`'s parameters (`self` skipped)."""
    hints = get_type_hints(fn, include_extras=True)
    fields: dict[str, Any] = {}
    for name, param in inspect.signature(fn).parameters.items():
        if name == "self":
            continue
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[name] = _field(hints.get(name, Any), default)
    return pydantic.create_model(model_name, **fields)


class FunctionTool:
    """A Tool over a function or method; see the module doc. `schema`, when given, is what the
    model is shown instead of the derived one (a recipe whose prompt must stay byte-identical);
    arguments are still validated by the derived model. `errors` renders a CallError as the
    tool message's content."""

    def __init__(
        self,
        fn: Callable[..., Any],
        name: str | None = None,
        description: str | None = None,
        schema: dict[str, Any] | None = None,
        errors: Callable[[CallError], str] = json_error,
    ) -> None:
        self._fn = fn
        self._instance: Any = None
        self._name = name or fn.__name__
        self._description = description if description is not None else (fn.__doc__ or "")
        self._model = parameters_model(fn, f"{fn.__name__}_params")
        self._schema = schema
        self.errors = errors

    @property
    def name(self) -> str:
        return self._name

    @property
    def description(self) -> str:
        return self._description

    @property
    def owner(self) -> Any:
        """The instance a @tool method is bound to (None for a plain function)."""
        return self._instance

    @property
    def parameters_schema(self) -> dict[str, Any]:
        return self._schema if self._schema is not None else self._model.model_json_schema()

    def error_result(self, error: CallError, call_id: str) -> ToolResult:
        result = text_result(self.errors(error), call_id=call_id, name=self.name)
        result.metadata["error"] = error.kind
        return result

    async def run(self, input: ToolInput) -> ToolResult:
        call_id = input.call_id or ""
        try:
            arguments = self._model.model_validate(input.arguments)
        except pydantic.ValidationError as e:
            return self.error_result(CallError("arguments", f"invalid arguments: {e}"), call_id)
        bound = () if self._instance is None else (self._instance,)
        try:
            out = self._fn(*bound, **dict(arguments))
            if inspect.isawaitable(out):
                out = await out
        except Exception as e:  # a tool's failure is the model's observation, not a crash
            return self.error_result(CallError("execution", f"{type(e).__name__}: {e}"), call_id)
        if isinstance(out, str):
            return text_result(out, call_id=call_id, name=self.name)
        if not isinstance(out, ToolResult):
            raise TypeError(
                f"tool {self.name} returned {type(out).__name__}; expected str or ToolResult"
            )
        for message in out.messages:
            message.setdefault("tool_call_id", call_id)
            message.setdefault("name", self.name)
        return out

    def __get__(self, instance: Any, owner: type | None = None) -> FunctionTool:
        # A @tool method binds to its instance, so tools can share the instance's state.
        if instance is None:
            return self
        bound = FunctionTool.__new__(FunctionTool)
        bound.__dict__.update(self.__dict__)
        bound._instance = instance
        return bound


@overload
def tool(fn: Callable[..., Any], /) -> FunctionTool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    schema: dict[str, Any] | None = None,
    errors: Callable[[CallError], str] = json_error,
) -> Callable[[Callable[..., Any]], FunctionTool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    schema: dict[str, Any] | None = None,
    errors: Callable[[CallError], str] = json_error,
) -> FunctionTool | Callable[[Callable[..., Any]], FunctionTool]:
    """Make a Tool of a function returning `str` (the tool message) or a ToolResult; as `@tool`
    or `@tool(name=..., description=..., schema=..., errors=...)`."""

    def wrap(f: Callable[..., Any]) -> FunctionTool:
        return FunctionTool(f, name, description, schema, errors)

    return wrap if fn is None else wrap(fn)
