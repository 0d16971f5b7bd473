"""Turning command-line words into config values: `--dpo-beta 0.1`, `--dpo-beta=0.1`, the aliases
of config.ALIASES (short flags `-m`, `-d`, `-e`, `-b`, `-l`, `-r` and the seed system's names such
as `--model`, `--epochs`), tinker-cookbook style `key=value` with dotted keys, and `--flag` /
`--no-flag` for booleans. Unknown names fail with a suggestion."""

from __future__ import annotations

import difflib
import json
import tomllib
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from kitchen.engine.errors import ConfigError
from kitchen.engine.recipe import Recipe
from kitchen.workflows.common.config import (
    TrainConfig,
    aliases,
    flat_fields,
    flat_name,
    flat_values,
    nest,
)


def flag(field: str) -> str:
    return "--" + field.replace("_", "-")


def flags_of(model: type[BaseModel]) -> dict[str, str]:
    """Every flag a recipe takes (its fields' and their aliases') -> the flat field name."""
    out = {flag(name): name for name in _fields(model)}
    for alias, target in aliases(model).items():
        out[alias if alias.startswith("-") else flag(alias)] = target
    return out


def _is_str_like(annotation: Any) -> bool:
    if annotation is str:
        return True
    origin = typing.get_origin(annotation)
    if origin is Literal:
        return all(isinstance(a, str) for a in typing.get_args(annotation))
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        return len(args) == 1 and _is_str_like(args[0])
    return False


def _allows_none(annotation: Any) -> bool:
    return annotation is Any or (
        typing.get_origin(annotation) in (typing.Union, types.UnionType)
        and type(None) in typing.get_args(annotation)
    )


def _is_bool(annotation: Any) -> bool:
    if annotation is bool:
        return True
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        return args == [bool]
    return False


def coerce(annotation: Any, raw: str) -> Any:
    """Strings stay strings for str fields; anything else is read as JSON when it parses."""
    if raw.lower() in ("none", "null") and _allows_none(annotation):
        return None
    if _is_str_like(annotation):
        return raw
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw


def _suggest(name: str, known: list[str]) -> str:
    close = difflib.get_close_matches(name, known, n=1)
    return f"; did you mean {close[0]}?" if close else ""


def _set_dotted(out: dict[str, Any], key: str, value: Any) -> None:
    parts = key.split(".")
    node = out
    for p in parts[:-1]:
        node = node.setdefault(p, {})
    node[parts[-1]] = value


def _annotation_for(model: type[BaseModel], dotted: str, recipe: str) -> Any:
    parts = dotted.split(".")
    current: Any = model
    for i, part in enumerate(parts):
        fields = (
            current.model_fields
            if isinstance(current, type) and issubclass(current, BaseModel)
            else None
        )
        if fields is None:
            return Any  # a dict-valued field: keys below it are free-form
        if part not in fields:
            raise ConfigError(
                f"{'.'.join(parts[: i + 1])} is not an option of recipe {recipe}{_suggest(part, list(fields))}"
            )
        current = fields[part].annotation
    return current


def _fields(model: type[BaseModel]) -> dict[str, FieldInfo]:
    """Every option by its flat (flag) name: a TrainConfig's nested section fields flattened."""
    if issubclass(model, TrainConfig):
        return {name: info for name, (_, info) in flat_fields(model).items()}
    return dict(model.model_fields)


def parse_overrides(model: type[BaseModel], args: list[str], recipe: str) -> dict[str, Any]:
    """Parse the recipe's flags from `args` into config overrides (flat names, dotted keys nested)."""
    fields = _fields(model)
    flags = flags_of(model)
    out: dict[str, Any] = {}
    i = 0
    while i < len(args):
        word = args[i]
        if word.startswith("-"):
            name_part, eq, inline = word.partition("=")
            if (
                name_part.startswith("--no-")
                and flags.get("--" + name_part[5:])
                and _is_bool(fields[flags["--" + name_part[5:]]].annotation)
            ):
                out[flags["--" + name_part[5:]]] = False
                i += 1
                continue
            elif name_part in flags:
                field = flags[name_part]
            else:
                raise ConfigError(
                    f"{name_part} is not an option of recipe {recipe}{_suggest(name_part, sorted(flags))}"
                )
            annotation = fields[field].annotation
            if eq:
                raw = inline
            elif _is_bool(annotation) and (
                i + 1 >= len(args) or args[i + 1].lower() not in ("true", "false")
            ):
                out[field] = True
                i += 1
                continue
            else:
                if i + 1 >= len(args):
                    raise ConfigError(f"{name_part} needs a value")
                raw = args[i + 1]
                i += 1
            out[field] = coerce(annotation, raw)
        elif "=" in word:
            key, _, raw = word.partition("=")
            key = aliases(model).get(key, key) if not key.startswith("-") else key
            if key in fields:
                out[key] = coerce(fields[key].annotation, raw)
            else:
                _set_dotted(out, key, coerce(_annotation_for(model, key, recipe), raw))
        else:
            raise ConfigError(
                f"unexpected argument {word!r}; options are --flag value or key=value"
            )
        i += 1
    return nested(model, out)


def nested(model: type[BaseModel], values: dict[str, Any]) -> dict[str, Any]:
    """Flat and dotted names in the nested shape of `model`, so that layers merge per field."""
    return nest(model, values) if issubclass(model, TrainConfig) else values


def load_config_file(path: Path, model: type[BaseModel], recipe: str) -> dict[str, Any]:
    if not path.exists():
        raise ConfigError(f"config file {path} does not exist")
    try:
        if path.suffix == ".toml":
            data = tomllib.loads(path.read_text())
        elif path.suffix == ".json":
            data = json.loads(path.read_text())
        else:
            raise ConfigError(f"config file {path}: expected .toml or .json")
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as e:
        raise ConfigError(f"config file {path}: {e}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path}: expected a table of fields")
    known = [*model.model_fields, *_fields(model), *aliases(model)]
    for key in data:
        if key.split(".")[0] not in known:
            raise ConfigError(
                f"config file {path}: {key!r} is not a field of recipe {recipe}{_suggest(key, known)}"
            )
    return nested(model, data)


def deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        out[k] = (
            deep_merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
        )
    return out


@dataclass(frozen=True)
class Option:
    """One recipe option as `kitchen show` and docs/cli.md list it."""

    name: str  # the flat name: its flag is flag(name)
    annotation: Any
    default: Any  # the recipe's own default (its `defaults` applied)
    presets: dict[str, Any]  # preset name -> value, for the presets that set it
    description: str
    flags: tuple[str, ...] = ()  # its flag, then its aliases' flags

    @property
    def type_name(self) -> str:
        text = getattr(self.annotation, "__name__", None) or str(self.annotation)
        return text.replace("typing.", "").replace("NoneType", "None")


def recipe_options(recipe: Recipe[Any]) -> list[Option]:
    """Every option of a recipe by flat name, with the defaults of a Config built from nothing."""
    model = recipe.Config
    defaults = flat_values(model.model_validate({})) if issubclass(model, TrainConfig) else {}
    presets = {
        p: {flat_name(model, k): v for k, v in values.items()}
        for p, values in recipe.presets.items()
    }
    flags: dict[str, list[str]] = {}
    for word, name in flags_of(model).items():
        flags.setdefault(name, []).append(word)
    return [
        Option(
            name,
            info.annotation,
            defaults.get(name, info.get_default(call_default_factory=True)),
            {p: values[name] for p, values in presets.items() if name in values},
            info.description or "",
            tuple(flags[name]),
        )
        for name, info in _fields(model).items()
    ]
