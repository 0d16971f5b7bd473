"""Kimi K2.5's TypeScript-style tool declarations, character for character as its template writes them."""

from __future__ import annotations

from typing import Any

import pytest

from train_core.renderers.kimi_tool_declarations import encode_tools_typescript


def _tools(*functions: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"type": "function", "function": f} for f in functions]


SCHEMAS: dict[str, list[dict[str, Any]]] = {
    "constraints_and_defaults": _tools(
        {
            "name": "search",
            "description": "Search the web.\n\nReturns links.",
            "parameters": {
                "type": "object",
                "properties": {
                    "query": {"type": "string", "minLength": 1, "maxLength": 200},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 50, "default": 10},
                    "ratio": {"type": "number", "default": 0.5},
                    "safe": {"type": "boolean", "default": True},
                    "lang": {"type": ["string", "null"], "enum": ["en", "fr", None]},
                    "filters": {"type": "object", "default": {"site": "a.org"}},
                },
                "required": ["query"],
            },
        }
    ),
    "arrays_and_maps": _tools(
        {
            "name": "tag",
            "parameters": {
                "type": "object",
                "properties": {
                    "labels": {
                        "type": "array",
                        "minItems": 1,
                        "items": {"type": "string", "description": "One label", "pattern": "^a"},
                    },
                    "matrix": {"type": "array", "items": {"type": "array"}},
                    "meta": {"type": "object", "additionalProperties": {"type": "integer"}},
                    "open": {"type": "object", "additionalProperties": True},
                    "closed": {"type": "object", "properties": {}, "additionalProperties": False},
                    "anything": {},
                },
                "required": ["labels", "meta"],
            },
        }
    ),
    "definitions": _tools(
        {
            "name": "plan",
            "description": "Make a plan.",
            "parameters": {
                "type": "object",
                "$defs": {
                    "Step": {
                        "type": "object",
                        "description": "One step.",
                        "properties": {"title": {"type": "string"}},
                        "required": ["title"],
                    }
                },
                "properties": {"steps": {"type": "array", "items": {"$ref": "#/$defs/Step"}}},
            },
        }
    ),
    "self_reference": _tools(
        {
            "name": "tree",
            "parameters": {
                "type": "object",
                "properties": {
                    "value": {"type": "string"},
                    "children": {"type": "array", "items": {"$ref": "#"}},
                },
                "required": ["value"],
            },
        },
        {"name": "no_parameters"},
    ),
    "non_function_tools_skipped": [{"type": "_plugin", "function": {"name": "x"}}],
}


def test_required_fields_come_first_and_integers_are_numbers() -> None:
    tools = _tools(
        {
            "name": "add",
            "description": "Add two numbers.",
            "parameters": {
                "type": "object",
                "properties": {"b": {"type": "integer"}, "a": {"type": "integer"}},
                "required": ["b"],
            },
        }
    )
    assert encode_tools_typescript(tools) == (
        "# Tools\n\n## functions\nnamespace functions {\n"
        "// Add two numbers.\n"
        "type add = (_: {\n  b: number,\n  a?: number\n}) => any;\n"
        "}\n"
    )


def test_an_enum_value_of_the_wrong_type_is_refused() -> None:
    tools = _tools(
        {
            "name": "f",
            "parameters": {
                "type": "object",
                "properties": {"n": {"type": "integer", "enum": ["x"]}},
            },
        }
    )
    with pytest.raises(ValueError, match="Enum value 'x'"):
        encode_tools_typescript(tools)


@pytest.mark.parametrize("name", SCHEMAS)
def test_matches_the_encoder_kimi_ships(name: str) -> None:
    reference = pytest.importorskip(
        "tinker_cookbook.renderers.kimi_k2_5_tool_declaration_ts",
        reason="tinker-cookbook 0.6.1 not installed",
    )
    assert encode_tools_typescript(SCHEMAS[name]) == reference.encode_tools_to_typescript_style(
        SCHEMAS[name]
    )
