"""One config resolution: what a run of a recipe is, decided once. `kitchen run`, `kitchen graph`,
`kitchen show` and `kitchen.run` call `resolve_config`; nothing after it decides again.

Precedence: the Config's defaults < --preset < --config file < Python values < flags and
key=values. The words users type: `--dpo-beta 0.1`, `--dpo-beta=0.1`, the aliases of
config.ALIASES (short flags `-m`, `-d`, `-e`, `-b`, `-l`, `-r`, crucible_kitchen's names such as
`--model`, `--epochs`, old names such as `--log-path`), tinker-cookbook style `key=value` with
dotted keys, and `--flag` / `--no-flag` (`no_key=true`) for booleans (`--no-register`);
unknown names fail with a suggestion. Every layer keeps the names it was written in: which field
a name sets is decided once, by config.nest, as the config is built.

tinker-cookbook's run keys, `max_steps` and `behavior_if_log_dir_exists`, say how a run runs, not
what it trains: they are taken out of every layer into `Resolved.run` (RunKeys), no Config field,
and mean what `kitchen run --max-steps` and `--if-exists` mean.
"""

from __future__ import annotations

import difflib
import json
import tomllib
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

import kitchen.app.builtins  # noqa: F401  (registers the built-in backends and model registry)
from kitchen.app.rundir import IfExists
from kitchen.engine.errors import ConfigError
from kitchen.engine.graph import Workflow
from kitchen.engine.plugins import BACKENDS, MODEL_REGISTRIES, RECIPES
from kitchen.engine.recipe import Recipe, binding
from kitchen.engine.stage import stage_ports
from kitchen.engine.validate import walk
from kitchen.ports import TrainingBackend
from kitchen.workflows.common.config import (
    TrainConfig,
    aliases,
    flat_fields,
    flat_name,
    flat_values,
    group_of,
    negation,
    spellings,
)

# The ports a run has: backend and datasets always; those kitchen opens from the config when a stage
# names them (open_ports); any other the caller passes (kitchen.run(ports=...)).
ALWAYS_OPEN = frozenset({"backend", "datasets"})
OPENED_FROM_CONFIG = frozenset({"registry", "agents"})


# Run key -> the flag of `kitchen run` it means. A flag typed wins over its key.
RUN_KEYS = {"max_steps": "--max-steps", "behavior_if_log_dir_exists": "--if-exists"}
IF_EXISTS: tuple[str, ...] = get_args(IfExists)


@dataclass(frozen=True)
class RunKeys:
    """The run keys a run's layers gave (None: not given)."""

    max_steps: int | None = None
    if_exists: IfExists | None = None


def run_keys(layers: Sequence[Mapping[str, Any]]) -> tuple[list[Mapping[str, Any]], RunKeys]:
    """`layers` without their run keys, and those keys (later layers win), checked."""
    found: dict[str, Any] = {}
    for layer in layers:
        found.update({k: v for k, v in layer.items() if k in RUN_KEYS})
    steps = found.get("max_steps")
    if steps is not None and (isinstance(steps, bool) or not isinstance(steps, int) or steps < 1):
        raise ConfigError(f"max_steps: expected a whole number of steps >= 1 (got {steps!r})")
    behavior = found.get("behavior_if_log_dir_exists")
    if behavior is not None and behavior not in IF_EXISTS:
        raise ConfigError(
            f"behavior_if_log_dir_exists: expected {', '.join(IF_EXISTS)} (got {behavior!r})"
        )
    kept: list[Mapping[str, Any]] = [
        {k: v for k, v in layer.items() if k not in RUN_KEYS} for layer in layers
    ]
    return kept, RunKeys(steps, behavior)


def get_recipe(name: str) -> Recipe[Any]:
    recipe_cls = RECIPES.get(name)
    recipe = recipe_cls() if isinstance(recipe_cls, type) else recipe_cls
    if not recipe.name:
        recipe.name = name
    return recipe


@dataclass(frozen=True)
class Resolved:
    """A recipe run as resolved: its config, backend and run directory; its workflow and the
    ports that workflow needs are built on first use (`kitchen show` needs neither)."""

    recipe: Recipe[Any]
    config: TrainConfig
    backend: str | TrainingBackend
    log_dir: Path | None
    run: RunKeys = RunKeys()

    @cached_property
    def workflow(self) -> Workflow[Any]:
        return self.recipe.workflow(self.config)

    @cached_property
    def ports(self) -> frozenset[str]:
        """The ports the run opens from the config for its workflow (besides backend and
        datasets): those its stages name that kitchen knows how to open."""
        return needed_ports(self.workflow) & OPENED_FROM_CONFIG


def resolve_config(
    recipe: str | Recipe[Any],
    *,
    values: TrainConfig | Mapping[str, Any] | None = None,
    config_file: Path | None = None,
    args: Sequence[str] = (),
    preset: str | None = None,
    backend: str | TrainingBackend | None = None,
    log_dir: str | Path | None = None,
    default_log_dir: bool = False,
) -> Resolved:
    """The run of `recipe` (a name or an instance) with config `values` (a built config, or
    values in any spelling), a config file, command-line `args` and a `preset`.

    `backend` (a name or an object) and `log_dir` win over the config's backend and log_dir; a
    backend name is looked up now, so a typo fails before anything runs. With neither a log_dir
    nor a config log_dir, `default_log_dir` (kitchen run) writes to runs/<recipe>; the Python API
    writes no run directory.
    """
    rec = get_recipe(recipe) if isinstance(recipe, str) else recipe
    keys = RunKeys()
    if isinstance(values, TrainConfig) and not (config_file or args or preset):
        bind = binding(rec)
        cfg = bind(values) if bind else values
    else:
        layers: list[Mapping[str, Any]] = []
        if preset:
            if preset not in rec.presets:
                raise ConfigError(
                    f"recipe {rec.name} has no preset {preset!r}; presets: "
                    f"{', '.join(rec.presets) or 'none'}"
                )
            layers.append(rec.presets[preset])
        if config_file is not None:
            layers.append(load_config_file(config_file, rec.Config, rec.name))
        if isinstance(values, TrainConfig):
            layers.append(values.model_dump())
        elif values is not None:
            layers.append(values)
        layers.append(parse_overrides(rec.Config, list(args), rec.name))
        layers, keys = run_keys(layers)
        cfg = build_config(rec, layers)
    if isinstance(backend, str):
        cfg = cfg.model_copy(update={"backend": backend})  # config.json says what really ran
    if isinstance(backend or cfg.backend, str):
        BACKENDS.get(str(backend or cfg.backend))  # an unknown name fails here, before the run
    out = log_dir or cfg.log_dir or (f"runs/{rec.name}" if default_log_dir else None)
    return Resolved(rec, cfg, backend or cfg.backend, Path(out) if out else None, keys)


def build_config(
    recipe: Recipe[Any], layers: Sequence[Mapping[str, Any]], bind: bool = True
) -> TrainConfig:
    """The recipe's Config from `layers` (later ones win), bound by the recipe (Recipe.bind)
    unless `bind` is false (values as typed, as `kitchen show` lists them); a bad value names its
    flag and the constraint."""
    if not (isinstance(recipe.Config, type) and issubclass(recipe.Config, TrainConfig)):
        raise ConfigError(f"recipe {recipe.name}: its Config must subclass kitchen.TrainConfig")
    layers, auto = _without_auto_lr(recipe.Config, layers)
    try:
        then = binding(recipe) if bind else None
        cfg = recipe.Config.from_layers(*layers, then=then)
        if not auto:
            return cfg
        # built again with the number, so the recipe's bind sees the learning rates that run
        lr = _recommended_lr(cfg)
        return recipe.Config.from_layers(*layers, dict.fromkeys(auto, lr), then=then)
    except ValidationError as e:
        raise ConfigError(
            f"recipe {recipe.name}: {format_validation_error(e, recipe.Config)}"
        ) from None


AUTO = "auto"  # learning_rate=auto: tinker-cookbook's get_lr for the model (and LoRA or not)
LR_PATH = "optimizer.learning_rate"


def _without_auto_lr(
    model: type[TrainConfig], layers: Sequence[Mapping[str, Any]]
) -> tuple[list[Mapping[str, Any]], list[str]]:
    """`layers` without their `auto` learning rates (any spelling), and the paths of the
    learning rates that are auto: the run's, and the recipe's section rates
    (`Config.section_learning_rates`). The last layer that sets a rate decides (an earlier auto
    is overridden, as any earlier value); a layer asking learning_rate=auto asks it of every
    section rate too, unless that layer or a later one sets the section's rate."""
    known = spellings(model)
    sections = model.section_learning_rates
    run_lr: tuple[int, bool] | None = None  # (layer, auto) of the last layer setting the run's
    section_lr: dict[str, tuple[int, bool]] = {}
    kept: list[Mapping[str, Any]] = []
    for i, layer in enumerate(layers):
        out = dict(layer)
        for key, value in layer.items():
            path = known.get(key)
            if key == "optimizer" and isinstance(value, Mapping) and "learning_rate" in value:
                path, value = LR_PATH, value["learning_rate"]
                if value == AUTO:
                    out[key] = {k: v for k, v in layer[key].items() if k != "learning_rate"}
            elif path == LR_PATH or path in sections:
                if value == AUTO:
                    del out[key]
            else:
                continue
            if path == LR_PATH:
                run_lr = (i, value == AUTO)
            else:
                section_lr[str(path)] = (i, value == AUTO)
        kept.append(out)
    auto = [LR_PATH] if run_lr is not None and run_lr[1] else []
    for path in sections:
        own = section_lr.get(path)
        if own is not None and (run_lr is None or own[0] >= run_lr[0]):
            auto += [path] if own[1] else []
        elif run_lr is not None and run_lr[1]:
            auto.append(path)
    return kept, auto


def _recommended_lr(cfg: TrainConfig) -> float:
    from kitchen.app.model_dims import recommended_lr

    try:
        return recommended_lr(cfg.model_name, is_lora=cfg.lora_rank > 0)
    except ValueError as e:
        raise ConfigError(f"learning_rate=auto: {e}") from None


def format_validation_error(err: ValidationError, model: type[BaseModel]) -> str:
    """One line per error; a nested group's field by its flag (`optimizer.beta1` -> --adam-beta1)."""
    parts = []
    for e in err.errors():
        loc = flat_name(model, ".".join(str(x) for x in e["loc"]))
        name = flag(loc) if loc and "." not in loc else loc
        got = e.get("input")
        got_text = "" if isinstance(got, (dict, tuple)) else f" (got {got!r})"  # not a whole config
        label = f"{name}: " if name else ""  # a check of the whole config names its fields itself
        parts.append(f"{label}{e['msg']}{got_text}")
    return "; ".join(parts)


def needed_ports(workflow: Workflow[Any]) -> frozenset[str]:
    """Every port a stage of `workflow` names (the graph walk): the one answer to which ports a
    run opens."""
    nodes = walk([*workflow.nodes, *workflow.finally_])
    return frozenset(p for node, _ in nodes for p in stage_ports(node))


def open_ports(
    needed: frozenset[str],
    registry: str | None,
    given: Mapping[str, Any] | None = None,
    config: TrainConfig | None = None,
) -> dict[str, Any]:
    """The ports `given`, and those kitchen opens itself (the model registry named by
    `registry`, the agent gateway in `config`'s chat format) for what `needed` names and `given`
    lacks. The caller closes what it opened (`opened_here`)."""
    ports = dict(given or {})
    if "registry" in needed and "registry" not in ports:
        ports["registry"] = MODEL_REGISTRIES.get("default")(registry)
    if "agents" in needed and "agents" not in ports:
        ports["agents"] = open_agent_gateway(config)
    return ports


def opened_here(ports: Mapping[str, Any], given: Mapping[str, Any] | None) -> list[Any]:
    """The ports open_ports opened itself that have a close(): the run's to close at its end."""
    return [p for name, p in ports.items() if name not in (given or {}) and hasattr(p, "close")]


def open_agent_gateway(config: TrainConfig | None) -> Any:
    """The run's agent gateway: in-process clients for the agent rollouts, in the config's chat
    format (default: the model's), and HTTP on the config's `agent_gateway_port` where set (a
    free port where the rollouts go over HTTP and none is set). Its
    policy is set by the workflow (SetAgentPolicy) once the first sampler exists."""
    from kitchen.serve.gateway import open_gateway

    agents = getattr(config, "agents", None)
    port = getattr(agents, "port", None)
    if port is None and getattr(agents, "transport", None) == "http":
        port = 0  # rollouts over HTTP need a port; any free one
    return open_gateway(
        renderer=config.renderer_name if config is not None else None,
        context=config.context_length if config is not None else None,
        port=port,
    )


# What users type: flags, key=values and config files, as config values under the names typed.


def flag(field: str) -> str:
    return "--" + field.replace("_", "-")


def flags_of(model: type[BaseModel]) -> dict[str, str]:
    """Every flag a recipe takes -> the key it sets: a field's flat name, or the alias it spells (a
    short flag sets its field's flat name). A bool's `--no-FLAG` is parse_overrides'."""
    out = {flag(name): name for name in _fields(model)}
    for alias, target in aliases(model).items():
        out[alias if alias.startswith("-") else flag(alias)] = (
            target if alias.startswith("-") else alias
        )
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


def _annotation(model: type[BaseModel], key: str, recipe: str) -> Any:
    """The type of the field `key` sets (any spelling); a key below a dict-valued field is
    free-form (Any). An unknown name fails with a suggestion."""
    if negation(model, key) is not None:
        return bool
    if key == "max_steps":
        return int
    if key in RUN_KEYS:
        return str
    flat = flat_name(model, key)
    if flat in _fields(model):
        return _fields(model)[flat].annotation
    head, dot, leaf = key.partition(".")
    info = model.model_fields.get(head)
    if info is None:
        known = sorted({*_fields(model), *model.model_fields, *RUN_KEYS})
        raise ConfigError(f"{head} is not an option of recipe {recipe}{_suggest(head, known)}")
    group = group_of(info)
    if dot and group is not None:
        known = list(group.model_fields)
        raise ConfigError(f"{key} is not an option of recipe {recipe}{_suggest(leaf, known)}")
    return Any


def _fields(model: type[BaseModel]) -> dict[str, FieldInfo]:
    """Every option by its flat (flag) name: a TrainConfig's nested group fields flattened."""
    if issubclass(model, TrainConfig):
        return {name: info for name, (_, info) in flat_fields(model).items()}
    return dict(model.model_fields)


def parse_overrides(model: type[BaseModel], args: list[str], recipe: str) -> dict[str, Any]:
    """The recipe's flags and key=values in `args` as config values, under the names typed."""
    flags = flags_of(model)
    out: dict[str, Any] = {}
    i = 0
    while i < len(args):
        word = args[i]
        if not word.startswith("-"):
            if "=" not in word:
                raise ConfigError(
                    f"unexpected argument {word!r}; options are --flag value or key=value"
                )
            key, _, raw = word.partition("=")
            out[key] = coerce(_annotation(model, key, recipe), raw)
            i += 1
            continue
        name, eq, inline = word.partition("=")
        negative = name[2:].replace("-", "_")  # --no-FLAG of a bool: no_NAME, which nest negates
        if name in flags:
            key = flags[name]
        elif negation(model, negative) is not None:
            key = negative
        else:
            known = sorted({*flags, *RUN_KEYS.values()})  # `kitchen run`'s own flags too
            raise ConfigError(f"{name} is not an option of recipe {recipe}{_suggest(name, known)}")
        annotation = _annotation(model, key, recipe)
        if eq:
            raw = inline
        elif _is_bool(annotation) and (
            i + 1 >= len(args) or args[i + 1].lower() not in ("true", "false")
        ):
            out[key] = True
            i += 1
            continue
        else:
            if i + 1 >= len(args):
                raise ConfigError(f"{name} needs a value")
            raw = args[i + 1]
            i += 1
        value = coerce(annotation, raw)
        if get_origin(annotation) is list:  # a list flag repeats: --vllm-url A --vllm-url B
            value = [*out.get(key, []), *(value if isinstance(value, list) else [value])]
        out[key] = value
        i += 1
    return out


def load_config_file(path: Path, model: type[BaseModel], recipe: str) -> dict[str, Any]:
    """A `--config` file's fields: TOML, JSON or YAML (the recipe presets' format)."""
    if not path.exists():
        raise ConfigError(f"config file {path} does not exist")
    import yaml  # the presets need it too: a dependency already

    try:
        if path.suffix == ".toml":
            data = tomllib.loads(path.read_text())
        elif path.suffix == ".json":
            data = json.loads(path.read_text())
        elif path.suffix in (".yaml", ".yml"):
            data = yaml.safe_load(path.read_text())
        else:
            raise ConfigError(f"config file {path}: expected .toml, .json, .yaml or .yml")
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as e:
        raise ConfigError(f"config file {path}: {e}") from None
    except yaml.YAMLError as e:
        raise ConfigError(f"config file {path}: {' '.join(str(e).split())}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path}: expected a table of fields")
    known = [*model.model_fields, *_fields(model), *aliases(model), *RUN_KEYS]
    for key in data:
        if key.split(".")[0] not in known and negation(model, key) is None:
            raise ConfigError(
                f"config file {path}: {key!r} is not a field of recipe {recipe}{_suggest(key, known)}"
            )
    return data


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
    """Every option of a recipe by flat name, with its default and its value in each preset, as a
    user types them (before the recipe's `bind`: test_dataset's default is "auto", not the set it
    picks). A negated name (--no-register) is left to the description."""
    model = recipe.Config
    default_values = flat_values(build_config(recipe, [], bind=False))
    presets = {
        p: {flat_name(model, k): v for k, v in values.items()}
        for p, values in recipe.presets.items()
    }
    flags: dict[str, list[str]] = {}
    for word, key in flags_of(model).items():
        flags.setdefault(flat_name(model, key), []).append(word)
    return [
        Option(
            name,
            info.annotation,
            default_values[name],
            {p: values[name] for p, values in presets.items() if name in values},
            info.description or "",
            tuple(flags[name]),
        )
        for name, info in _fields(model).items()
    ]
