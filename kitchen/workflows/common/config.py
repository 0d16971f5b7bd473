"""Config fields every training recipe shares, and the one place their names are resolved. Each
recipe's Config subclasses TrainConfig and adds its own fields, each with a description and
validation (`extra="forbid"`).

Shared settings are nested config groups (`optimizer`, `checkpoint`, `evaluation`, `kl`).
A field's canonical spelling is its path, `evaluation.every`: what the code reads and config.json
records. Each field also has one flat name, its flag: the field name at the top level, the group
field's `alias` inside a group (`evaluation.every` is `eval_every`, `--eval-every`). Flags,
key=value, presets, config files and Python callers use either. Other names users type are the
ALIASES, and `no_NAME` for a bool field NAME (`no_register`), resolved here by `nest` and nowhere
else. A subclass
changes inherited defaults in one place, its `defaults` class variable, instead of redeclaring
fields.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import cache
from typing import Any, ClassVar, Literal, NamedTuple, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.fields import FieldInfo

from train_core.schedules import LRSchedule

# warmup_linear / warmup_cosine (crucible_kitchen's names for lr_schedule) are linear / cosine
# after this many warmup steps, unless warmup_steps says how many.
DEFAULT_WARMUP_STEPS = 10

# Other names of today's fields, one table for flags, key=value, config files and Python keys:
# crucible_kitchen's names (the Elixir kitchen and its tinkex_cookbook recipes), the short flags,
# and the names a field had before it was renamed. A key starting with "-" is a short flag only;
# any other works everywhere a field name does. An alias applies to the recipes whose Config has
# its field.
ALIASES: dict[str, str] = {
    "-m": "model_name",
    "model": "model_name",
    "-d": "dataset",
    "-e": "num_epochs",
    "epochs": "num_epochs",
    "-b": "batch_size",
    "-l": "learning_rate",
    "-r": "lora_rank",
    "reference_model": "reference_model_name",
    "num_rollouts": "num_batches",
    "log_path": "log_dir",  # tinker-cookbook's name
    "base_model": "registered_model",
    "register": "register_model",  # so no_register, the field's name before it was positive, works
    "sandbox_backend": "sandbox",  # "backend" is the training backend's word
}


class ConfigGroup(BaseModel):
    """A group of settings nested on a config. A field's `alias` is its flat (flag) name, read by
    `nest`; the group itself takes field names only, so no spelling is resolved twice."""

    model_config = ConfigDict(
        extra="forbid", validate_assignment=True, validate_by_name=True, validate_by_alias=False
    )


class OptimizerConfig(ConfigGroup):
    learning_rate: float = Field(
        1e-4, gt=0, description="Adam learning rate; auto: the model's recommended one (get_lr)"
    )
    schedule: LRSchedule = Field(
        "linear",
        alias="lr_schedule",
        description="LR schedule over the run; warmup_linear / warmup_cosine: linear / cosine "
        f"after warmup_steps (default {DEFAULT_WARMUP_STEPS}) of linear warmup",
    )

    @model_validator(mode="before")
    @classmethod
    def _split_warmup(cls, data: Any) -> Any:
        """warmup_X is X with warmup steps: stored as such, so config.json says what runs."""
        schedule = data.get("schedule") if isinstance(data, dict) else None
        if not isinstance(schedule, str) or not schedule.startswith("warmup_"):
            return data
        if "warmup_steps" not in cls.model_fields:
            raise ValueError(f"lr_schedule {schedule}: this recipe has no LR warmup")
        warmup = data.get("warmup_steps") or DEFAULT_WARMUP_STEPS
        return {**data, "schedule": schedule.removeprefix("warmup_"), "warmup_steps": warmup}


class AdamConfig(OptimizerConfig):
    """Every AdamParams field, for the workflows that pass them to optim_step."""

    warmup_steps: int = Field(0, ge=0, description="Linear LR warmup steps before the schedule")
    beta1: float = Field(0.9, ge=0, lt=1, alias="adam_beta1", description="Adam beta1")
    beta2: float = Field(0.95, ge=0, lt=1, alias="adam_beta2", description="Adam beta2")
    eps: float = Field(1e-8, gt=0, alias="adam_eps", description="Adam epsilon")
    weight_decay: float = Field(0.0, ge=0, description="AdamW weight decay")
    grad_clip_norm: float = Field(0.0, ge=0, description="Clip the global grad norm (0 = off)")


class CheckpointConfig(ConfigGroup):
    save_every: int = Field(
        20, ge=0, description="Save a resumable checkpoint every N steps (0 = never)"
    )
    load_path: str | None = Field(
        None,
        alias="load_checkpoint_path",
        description="Start from these saved weights (fresh optimizer)",
    )
    rolling_save_every: int = Field(
        0,
        ge=0,
        description="Also save a resume-only checkpoint (no sampler weights) every N steps, "
        "keeping the newest rolling_keep (0 = never)",
    )
    rolling_keep: int = Field(
        1, ge=1, description="Rolling checkpoints kept; older ones are deleted (1: the cookbook's)"
    )


class EvalConfig(ConfigGroup):
    every: int = Field(
        10,
        ge=0,
        alias="eval_every",
        description="Evaluate every N steps, on pre-step weights (0 = never)",
    )
    infrequent_every: int = Field(
        100,
        ge=0,
        alias="infrequent_eval_every",
        description="Run the recipe's infrequent evaluators (inline_evals) every N steps, on "
        "pre-step weights (0 = only at the end)",
    )


class KLConfig(ConfigGroup):
    penalty_coef: float = Field(
        0.0,
        ge=0,
        alias="kl_penalty_coef",
        description="Weight of the KL term in the advantage (0 = off)",
    )
    discount_factor: float = Field(
        0.0,
        ge=0,
        lt=1,
        alias="kl_discount_factor",
        description="Discount the KL over future tokens (0 = per token)",
    )
    compute_post_kl: bool = Field(
        False, description="Also log KL between pre- and post-update policy (extra scoring pass)"
    )


class TrainConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True, protected_namespaces=())

    # Inherited defaults this class changes, by flat or dotted name; merged down the class tree.
    defaults: ClassVar[dict[str, Any]] = {}
    # Whether the recipe's prompts carry images: the renderer then gets the model's image
    # processor (InitTrainingClient), and a model without one is refused before any step.
    takes_images: ClassVar[bool] = False
    # Learning rates of the recipe's sections beside the run's own (flat field names): each takes
    # `auto` as learning_rate does, and learning_rate=auto makes those left unset auto too.
    section_learning_rates: ClassVar[tuple[str, ...]] = ()

    model_name: str = Field(
        "kitchen/tiny-llama",
        description="The model to train (the SDK's base_model): a local dir, a HF name, "
        "smollm2-135m, kitchen/tiny-*",
    )
    backend: str = Field("local", description="Training backend: local | tinker | fake")
    base_url: str | None = Field(None, description="Tinker-compatible service URL (tinker backend)")
    dtype: Literal["auto", "float32", "bfloat16"] = Field(
        "auto",
        description="Local engine compute dtype: auto = bf16 autocast (fp32 weights and Adam) where "
        "the CPU or GPU has native bf16, else float32",
    )
    activation_checkpointing: Literal["auto", "on", "off"] = Field(
        "auto",
        description="Local engine: recompute decoder activations in backward instead of keeping "
        "them; auto = on only for a pass that would not fit in free memory otherwise (docs/memory.md)",
    )
    packing: bool = Field(
        False,
        description="Local engine: lay a micro-batch's rows end to end instead of padding them, "
        "attention confined per row (docs/memory.md)",
    )
    context_length: int | None = Field(
        None,
        gt=0,
        description="Local engine: positions the model takes, past its trained context by "
        "rescaling its RoPE (--rope-scaling); unset = the model's own (docs/memory.md)",
    )
    rope_scaling: Literal["yarn", "linear"] = Field(
        "yarn", description="Local engine: how --context-length rescales the RoPE"
    )
    sampler: Literal["local", "vllm"] = Field(
        "local",
        description="Local engine: what samples: local (the engine itself) | vllm (a vLLM server "
        "in its own environment, `make vllm`; docs/sampling.md)",
    )
    vllm_url: list[str] = Field(
        default_factory=list,
        description="--sampler vllm: a running vLLM server's URL (repeatable; requests are spread "
        "over them); none: Kitchen starts one",
    )
    vllm_gpu_memory_utilization: float | None = Field(
        None,
        gt=0,
        le=1,
        description="--sampler vllm on one GPU: the share of the card the vLLM it starts may take "
        "(the trainer gets the rest; docs/sampling.md)",
    )
    base_quantization: Literal["none", "nf4"] = Field(
        "none",
        description="Local engine: hold the base model's Linear layers in 4 bits (NF4, "
        "bitsandbytes) under LoRA; needs lora_rank > 0 (docs/memory.md)",
    )
    spread_sampling: bool = Field(
        False,
        description="Local engine at --nproc N > 1: each rank decodes a share of the sample "
        "requests (else rank 0 decodes them all); tokens as at N = 1 but for last-bit "
        "differences (docs/distributed.md)",
    )
    log_dir: str | None = Field(None, description="Run directory; default runs/<recipe>")
    seed: int = Field(0, description="Seed for data order, LoRA init and sampling")
    lora_rank: int = Field(
        32, ge=0, description="LoRA rank; 0 = full fine-tuning (local engine only)"
    )
    renderer_name: str | None = Field(
        None, description="Chat format; default: the model's recommended renderer"
    )
    optimizer: OptimizerConfig = Field(
        default_factory=lambda: OptimizerConfig.model_validate({}),
        description="Learning rate and schedule",
    )
    checkpoint: CheckpointConfig = Field(
        default_factory=lambda: CheckpointConfig.model_validate({}),
        description="Saving and loading checkpoints",
    )
    registered_model: str | None = Field(
        None, description="registry:NAME[:VERSION]: start from a registered model's weights"
    )
    register_model: bool | None = Field(
        None,
        description="Register the final model in the model registry (--register, --no-register); "
        "unset: yes, except on the fake backend, whose weights are no model",
    )
    registry: str | None = Field(
        None,
        description="Model registry: a SQLite path or mlflow:URI (default $KITCHEN_REGISTRY or the user data dir)",
    )
    registry_name: str | None = Field(
        None, description="Name to register the model under (default: the recipe name)"
    )
    wandb_project: str | None = Field(
        None, description="Also log metrics to this Weights & Biases project"
    )
    wandb_name: str | None = Field(None, description="Run name for W&B, Trackio and Neptune")
    trackio_project: str | None = Field(
        None, description="Also log metrics to this Trackio project (local-first)"
    )
    neptune_project: str | None = Field(
        None,
        description="Also log metrics to this Neptune project (workspace/name; NEPTUNE_MODE=offline keeps it local)",
    )

    @classmethod
    def from_layers(
        cls, *layers: Mapping[str, Any], then: Callable[[Self], Self] | None = None
    ) -> Self:
        """The config of defaults < layers[0] < layers[1] < ..., each layer in any spelling;
        `then` (a recipe's bind) decides what follows from it."""
        cfg = cls.model_validate(_Layers(layers))
        return then(cfg) if then else cfg

    @model_validator(mode="before")
    @classmethod
    def _nest_and_default(cls, data: Any) -> Any:
        """defaults < data, every spelling turned into the nested groups (nest's one call)."""
        if isinstance(data, _Layers):
            return nest(cls, all_defaults(cls), *data.layers)
        if not isinstance(data, dict):
            return data
        return nest(cls, all_defaults(cls), data)


class _Layers(NamedTuple):
    """Config values in precedence order, for TrainConfig.from_layers to nest in one pass."""

    layers: tuple[Mapping[str, Any], ...]


def group_of(info: FieldInfo) -> type[ConfigGroup] | None:
    annotation = info.annotation
    return (
        annotation if isinstance(annotation, type) and issubclass(annotation, ConfigGroup) else None
    )


@cache
def flat_fields(model: type[BaseModel]) -> dict[str, tuple[str, FieldInfo]]:
    """flat name -> (dotted path, FieldInfo) of every leaf field, in declaration order."""
    out: dict[str, tuple[str, FieldInfo]] = {}
    for name, info in model.model_fields.items():
        group = group_of(info)
        if group is None:
            out[name] = (name, info)
            continue
        for leaf, leaf_info in group.model_fields.items():
            out[leaf_info.alias or leaf] = (f"{name}.{leaf}", leaf_info)
    return out


@cache
def spellings(model: type[BaseModel]) -> dict[str, str]:
    """Every key users may type (path, flat name, alias) -> the field's path, its canonical
    spelling. `no_NAME` is `negation`'s."""
    out: dict[str, str] = {}
    for flat, (dotted, _) in flat_fields(model).items():
        out[flat] = out[dotted] = dotted
    for alias, target in aliases(model).items():
        if not alias.startswith("-"):
            out[alias] = out[target]
    return out


@cache
def aliases(model: type[BaseModel]) -> dict[str, str]:
    """The ALIASES (short flags too) that apply to `model`: alias -> flat field name."""
    fields = flat_fields(model) if issubclass(model, TrainConfig) else {}
    return {a: t for a, t in ALIASES.items() if t in fields and a not in fields}


def negation(model: type[BaseModel], key: str) -> str | None:
    """The path of the bool field that `key` = no_NAME negates (NAME any spelling of it), else
    None: `no_register=true`, like the flag `--no-register`, sets register_model to false."""
    known = spellings(model)
    if not key.startswith("no_") or key in known or key[3:] not in known:
        return None
    path = known[key[3:]]
    fields = {dotted: info for dotted, info in flat_fields(model).values()}
    bool_like = (bool, bool | None)  # register_model is unset (None) by default
    return path if path in fields and fields[path].annotation in bool_like else None


def flat_name(model: type[BaseModel], key: str) -> str:
    """The flat (flag) name of any spelling of a field; unknown names come back unchanged."""
    path = spellings(model).get(key, key)
    return next((f for f, (d, _) in flat_fields(model).items() if d == path), key)


def all_defaults(model: type[BaseModel]) -> dict[str, Any]:
    """The `defaults` of every class from the base down, later (more specific) ones winning."""
    merged: dict[str, Any] = {}
    for klass in reversed(model.__mro__):
        merged.update(vars(klass).get("defaults", {}))
    return merged


def nest(model: type[BaseModel], *layers: Mapping[str, Any]) -> dict[str, Any]:
    """Merge layers of config values (any spelling, flat, dotted or nested; later layers win) into
    the nested shape of `model`. Keys it does not know pass through, for pydantic to reject by
    name. A dotted key into a dict-valued field (`loss_fn_config.beta=1`) sets that one key."""
    known = spellings(model)
    out: dict[str, Any] = {}
    for layer in layers:
        for key, value in layer.items():
            if (negated := negation(model, key)) is not None:
                _put(out, negated, _negate(key, value))
                continue
            info = model.model_fields.get(key)
            # a group given as a dict merges leaf by leaf; a group object replaces it whole
            if info is not None and group_of(info) is not None and isinstance(value, dict):
                for leaf, leaf_value in value.items():
                    _put(out, known.get(f"{key}.{leaf}", f"{key}.{leaf}"), leaf_value)
            else:
                _put(out, known.get(key, key), value)
    return out


def _negate(key: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"{key}: expected true or false (got {value!r})")
    return not value


def _put(out: dict[str, Any], path: str, value: Any) -> None:
    group, dot, leaf = path.partition(".")
    if dot and isinstance(out.setdefault(group, {}), dict):
        out[group][leaf] = value
    else:
        out[path] = value


def flat_values(cfg: BaseModel) -> dict[str, Any]:
    """A config's values by flat name."""
    out: dict[str, Any] = {}
    for flat, (dotted, _) in flat_fields(type(cfg)).items():
        value: Any = cfg
        for part in dotted.split("."):
            value = getattr(value, part)
        out[flat] = value
    return out


class EpochTrainConfig(TrainConfig):
    """Training in epochs over a fixed dataset (supervised, preference): batches of examples, every
    Adam setting, and a held-out set evaluated every `eval_every` steps."""

    dataset: str = Field(
        "bundled:chat",
        description="Training rows: bundled:NAME | a local JSONL/parquet | a hub name",
    )
    dataset_split: str = Field("train", description='Split of dataset to train on ("train[1024:]")')
    test_dataset: str | None = Field(
        None,
        description="Held-out rows, named as dataset; auto: the dataset's own test split (see "
        "the recipe); None: no evaluation",
    )
    test_split: str = Field("test", description="Split of test_dataset to evaluate on")
    n_train_samples: int | None = Field(
        None, gt=0, description="Train on at most this many rows of dataset (None = all)"
    )
    max_length: int | None = Field(
        1024, gt=0, description="Longest example in tokens (longer ones are cut, see the recipe)"
    )
    batch_size: int = Field(8, gt=0, description="Examples (conversations or pairs) per step")
    num_epochs: int = Field(1, gt=0, description="Passes over the dataset")
    optimizer: AdamConfig = Field(
        default_factory=lambda: AdamConfig.model_validate({}),
        description="Learning rate, schedule, warmup and Adam settings",
    )
    evaluation: EvalConfig = Field(
        default_factory=lambda: EvalConfig.model_validate({}),
        description="When to evaluate on test_dataset",
    )
