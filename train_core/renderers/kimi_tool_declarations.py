"""Kimi K2.5's tool declarations: JSON-schema functions written as TypeScript-like type aliases.

    # Tools

    ## functions
    namespace functions {
    // Current weather for a city.
    type get_weather = (_: {
      // City name
      city: string,
      unit?: "celsius" | "fahrenheit"
    }) => any;
    }

Kimi K2.5's chat template declares tools this way (its tokenizer repo ships the encoder); the
output here is character-identical to it, including its quirks: integers become `number`,
required fields come first and each group is sorted by name, a function whose schema refers to
itself (`$ref: "#"`) gets an `interface parameters`, and `$defs` become interfaces.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Any

logger = logging.getLogger(__name__)

_INDENT = "  "
_FIELD_SEPARATOR = ",\n"
_CONSTRAINT_KEYS = {
    "string": ("maxLength", "minLength", "pattern"),
    "number": ("maximum", "minimum"),
    "integer": ("maximum", "minimum"),
    "array": ("minItems", "maxItems"),
}
_UNION_MEMBER = {
    "string": "string",
    "number": "number",
    "integer": "number",
    "boolean": "boolean",
    "null": "null",
    "object": "{}",
    "array": "Array<any>",
}
_ENUM_VALUE_CHECKS = {
    "string": lambda v: isinstance(v, str),
    "number": lambda v: isinstance(v, int | float),
    "integer": lambda v: isinstance(v, int),
    "boolean": lambda v: isinstance(v, bool),
}


@dataclass
class _Definitions:
    """`$defs` seen while parsing one function, and whether its schema refers to itself."""

    schemas: dict[str, Any] = field(default_factory=dict)
    self_referenced: bool = False

    def ref_name(self, ref: str) -> str:
        if ref == "#":
            self.self_referenced = True
            return "parameters"
        if not ref.startswith("#/$defs/"):
            raise ValueError(f"Unsupported reference format: {ref}")
        name = ref.split("/")[-1]
        if name not in self.schemas:
            raise ValueError(f"Reference not found: {ref}")
        return name


@dataclass
class _Field:
    name: str
    type: _Type
    optional: bool
    default: Any


@dataclass
class _Type:
    """One parsed schema node; `kind` picks which of the other fields are used."""

    kind: str  # scalar | object | array | enum | any_of | union | ref
    description: str = ""
    constraints: dict[str, Any] = field(default_factory=dict)
    name: str = ""  # scalar: the JSON type; ref: the referenced name
    fields: list[_Field] = field(default_factory=list)  # object
    extra_fields: _Type | bool | None = None  # object: additionalProperties
    members: list[_Type] = field(default_factory=list)  # array item; any_of members
    literals: list[str] = field(default_factory=list)  # enum and union, already written


def _described(kind: str, schema: dict[str, Any], constraint_type: str = "", **kw: Any) -> _Type:
    keys = _CONSTRAINT_KEYS.get(constraint_type, ())
    return _Type(
        kind,
        description=schema.get("description", ""),
        constraints={k: v for k, v in schema.items() if k in keys},
        **kw,
    )


def _check_enum(schema: dict[str, Any]) -> None:
    """Enum values must have the declared type; a two-type list must be `[T, "null"]`."""
    declared = schema.get("type")
    if declared is None:
        return
    if isinstance(declared, list):
        if len(declared) not in (1, 2) or (len(declared) == 2 and "null" not in declared):
            raise ValueError(f"Enum type {declared} is not supported")
        declared = declared[1] if declared[0] == "null" and len(declared) == 2 else declared[0]
    check = _ENUM_VALUE_CHECKS.get(declared)
    for value in schema["enum"]:
        if value is not None and check is not None and not check(value):
            raise ValueError(f"Enum value {value!r} does not have the declared type {declared}")


def _parse_object(schema: dict[str, Any], defs: _Definitions) -> _Type:
    node = _described("object", schema)
    if not schema:
        return node
    if "$defs" in schema:
        defs.schemas.update(schema["$defs"] or {})
    extra = schema.get("additionalProperties")
    node.extra_fields = _parse(extra, defs) if isinstance(extra, dict) else extra
    required = set(schema.get("required", []))
    node.fields = [
        _Field(
            name=name,
            type=_parse(prop, defs),
            optional=name not in required,
            default=prop.get("default") if isinstance(prop, dict) else None,
        )
        for name, prop in schema.get("properties", {}).items()
    ]
    return node


def _parse(schema: dict[str, Any] | bool, defs: _Definitions) -> _Type:
    if isinstance(schema, bool):
        if not schema:
            logger.warning("a false JSON schema is not supported; declaring it as null")
        return _Type("scalar", name="any" if schema else "null")
    if "$ref" in schema:
        return _described("ref", schema, name=defs.ref_name(schema["$ref"]))
    if "anyOf" in schema:
        return _described("any_of", schema, members=[_parse(s, defs) for s in schema["anyOf"]])
    if "enum" in schema:
        _check_enum(schema)
        literals = [f'"{v}"' if isinstance(v, str) else str(v) for v in schema["enum"]]
        return _described("enum", schema, literals=literals)
    if "type" in schema:
        declared = schema["type"]
        if isinstance(declared, list):
            return _described("union", schema, literals=[_UNION_MEMBER[t] for t in declared])
        if declared == "object":
            return _parse_object(schema, defs)
        if declared == "array":
            item = (
                _parse(schema["items"], defs)
                if schema.get("items")
                else _Type("scalar", name="any")
            )
            return _described("array", schema, "array", members=[item])
        return _described("scalar", schema, declared, name=declared)
    if not schema:
        return _Type("scalar", name="any")
    raise ValueError(f"Invalid JSON Schema object: {schema}")


def _comment(text: str, indent: str = "") -> str:
    return "\n".join(f"{indent}// {line}" if line else "" for line in text.split("\n"))


def _docstring(node: _Type, indent: str) -> str:
    lines = [_comment(node.description, indent)] if node.description else []
    if node.constraints:
        pairs = ", ".join(f"{k}: {v}" for k, v in sorted(node.constraints.items()))
        lines.append(f"{indent}// {pairs}")
    return "".join(line + "\n" for line in lines)


def _write_field(f: _Field, indent: str) -> str:
    text = _docstring(f.type, indent)
    if f.default is not None:
        plain = isinstance(f.default, int | float | bool)
        default = repr(f.default) if plain else json.dumps(f.default, ensure_ascii=False)
        text += f"{indent}// Default: {default}\n"
    return f"{text}{indent}{f.name}{'?' if f.optional else ''}: {_write(f.type, indent)}"


def _write_object(node: _Type, indent: str) -> str:
    inner = indent + _INDENT
    ordered = sorted(node.fields, key=lambda f: (f.optional, f.name))
    lines = [_write_field(f, inner) for f in ordered]
    extra = node.extra_fields
    if extra is not None:
        if isinstance(extra, _Type):
            lines.append(f"{inner}[k: string]: {_write(extra, inner)}")
        elif isinstance(extra, bool):
            lines.append(f"{inner}[k: string]: {'any' if extra else 'never'}")
        else:
            raise ValueError(f"Unknown additionalProperties: {extra}")
    if not lines:
        return "{}"
    return "{\n" + _FIELD_SEPARATOR.join(lines) + "\n" + indent + "}"


def _write(node: _Type, indent: str = "") -> str:
    """The node as a TypeScript type; nested lines are indented one step past `indent`."""
    match node.kind:
        case "scalar":
            return "number" if node.name == "integer" else node.name
        case "ref":
            return node.name
        case "object":
            return _write_object(node, indent)
        case "array":
            (item,) = node.members
            item_doc = _docstring(item, indent + _INDENT)
            if not item_doc:
                return f"Array<{_write(item, indent)}>"
            inner = indent + _INDENT
            return f"Array<\n{item_doc}{inner}{_write(item, inner)}\n{indent}>"
        case "any_of":
            return " | ".join(_write(m, indent) for m in node.members)
    return " | ".join(node.literals)  # enum, union


def _function_declaration(function: dict[str, Any]) -> str:
    defs = _Definitions()
    root = _parse_object(function.get("parameters") or {}, defs)
    interfaces = []
    if defs.self_referenced:
        # The self-referenced root keeps its fields in declaration order.
        body = _FIELD_SEPARATOR.join(_write_field(f, _INDENT) for f in root.fields)
        interfaces.append("interface parameters {" + (f"\n{body}\n" if body else "") + "}")
    for name, schema in list(defs.schemas.items()):
        described = _comment(schema["description"]) + "\n" if schema.get("description") else ""
        interfaces.append(f"{described}interface {name} {_write(_parse(schema, defs))}")
    signature = "parameters" if defs.self_referenced else _write(root)
    description = function.get("description")
    pieces = [
        "\n".join(interfaces),
        _comment(description) if description else "",
        f"type {function.get('name', 'function')} = (_: {signature}) => any;",
    ]
    return "\n".join(p for p in pieces if p)


def encode_tools_typescript(tools: list[dict[str, Any]]) -> str:
    """`{"type": "function", "function": {...}}` tools as Kimi's `# Tools` block ("" for none).

    Tools of other types are skipped, as the template skips them.
    """
    functions = [
        _function_declaration(tool["function"])
        for tool in tools
        if tool.get("type") == "function" and tool.get("function")
    ]
    if not functions:
        return ""
    return "# Tools\n\n## functions\nnamespace functions {\n" + "\n".join(functions) + "\n}\n"
