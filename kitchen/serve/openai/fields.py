"""Which request fields a translated route (/v1/responses, /v1/messages) takes, and the one-line
refusal of every other: a field the route does not translate is an error unless it cannot change
the answer (metadata, cache hints) or is at its neutral value, so nothing is silently ignored."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from kitchen.serve.errors import UserError


def request_body(raw: bytes, route: str) -> dict[str, Any]:
    """The JSON object of a request body, or a 400 saying it is not one."""
    import json

    try:
        body = json.loads(raw)
    except ValueError as e:
        raise UserError(f"{route}: body: not JSON ({e})") from None
    if not isinstance(body, dict):
        raise UserError(f"{route}: body: expected a JSON object, got {type(body).__name__}")
    return body


def check_fields(
    body: Mapping[str, Any],
    route: str,
    translated: Collection[str],
    no_effect: Collection[str],
    neutral: Mapping[str, Collection[Any]],
) -> None:
    """Refuse the first field that is neither translated, without effect, nor at a neutral value
    (None always is; a dict is when all its values are)."""
    for name, value in body.items():
        if name in translated or name in no_effect:
            continue
        if name in neutral:
            if _is_neutral(value, neutral[name]):
                continue
            raise UserError(f"{route}: {name}={value!r} is not supported by kitchen serve")
        raise UserError(f"{route}: {name}: not supported by kitchen serve")


def _is_neutral(value: Any, allowed: Collection[Any]) -> bool:
    if value is None or any(value == a for a in allowed):
        return True
    return isinstance(value, dict) and all(v is None for v in value.values())


def need(value: Any, kind: type | tuple[type, ...], where: str) -> Any:
    """`value` if it is a `kind`, else a 400 naming `where`."""
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise UserError(f"{where}: expected {names}, got {type(value).__name__}")
    return value


def chat_tool(tool: dict[str, Any], where: str, schema: str, optional: bool) -> dict[str, Any]:
    """A route's tool, its name, description and JSON schema at the top (`schema`: the schema's
    key; `optional`: an absent or empty one is no parameters) -> a chat tool."""
    function = {"name": need(tool.get("name"), str, f"{where}.name")}
    if tool.get("description") is not None:
        function["description"] = need(tool["description"], str, f"{where}.description")
    parameters = tool.get(schema)
    if optional:
        parameters = parameters or {}
    function["parameters"] = need(parameters, dict, f"{where}.{schema}")
    return {"type": "function", "function": function}
