"""Field access with errors a person can act on.

Every converter reports a bad row the same way, with the row's locator from the store, the field
path, what was found and what was expected:

    dataset file data/chat.jsonl:17: field "messages"[2].role is "assitant"; expected one of
    system, user, assistant, tool
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from kitchen.engine.errors import DataError


def field_path(key: str, *rest: int | str) -> str:
    """'"messages"[2].role' for field_path("messages", 2, "role")."""
    path = json.dumps(key)
    for part in rest:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return path


def show(value: Any, limit: int = 60) -> str:
    """A value as JSON, cut to `limit` characters."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list | tuple):
        return "an array"
    if isinstance(value, Mapping):
        return "an object"
    return "null" if value is None else f"a {type(value).__name__}"


def bad_field(where: str, path: str, value: Any, expected: str) -> DataError:
    """`where: field PATH is VALUE; expected EXPECTED` (the value shown as JSON, or its type)."""
    shown = show(value) if isinstance(value, str | int | float | bool) else json_type(value)
    return DataError(f"{where}: field {path} is {shown}; expected {expected}")


def missing_field(where: str, path: str, expected: str) -> DataError:
    return DataError(f"{where}: field {path} is missing; expected {expected}")


def require(row: Mapping[str, Any], key: str, where: str, expected: str) -> Any:
    """row[key], or a DataError naming the missing field."""
    if not isinstance(row, Mapping):
        raise DataError(f"{where}: row is {json_type(row)}; expected an object")
    if key not in row or row[key] is None:
        raise missing_field(where, field_path(key), expected)
    return row[key]


def require_str(row: Mapping[str, Any], key: str, where: str) -> str:
    value = require(row, key, where, "a string")
    if not isinstance(value, str):
        raise bad_field(where, field_path(key), value, "a string")
    return value
