"""Which converter reads which dataset, and loaders that return converted rows.

    rows = load_chat(store, "HuggingFaceH4/no_robots")          # hub name: its own converter
    rows = load_comparisons(store, "hhh", split="test")          # recipe alias -> hub dataset
    rows = load_math(store, "bundled:math")                       # bundled: the generic shape
    rows = load_code(store, "data/problems.jsonl")                # local file: the generic shape

Each row's errors name its file:line (or hub row) and field, through the store's `Rows.where`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cookbook.datasets.chat import chat_row, no_robots_row, tulu3_row
from cookbook.datasets.code import deepcoder_row
from cookbook.datasets.comparison import (
    arena_row,
    helpsteer2_pairs,
    helpsteer3_row,
    hh_rlhf_row,
    preference_row,
    tulu3_preference_row,
    ultrafeedback_row,
)
from cookbook.datasets.competition_math import (
    HENDRYCKS_CONFIGS,
    deepmath_row,
    hendrycks_math_row,
    polaris_row,
)
from cookbook.datasets.demonstrations import sciknoweval_row, toolalpaca_row
from cookbook.datasets.images import image_label_row
from cookbook.datasets.math import gsm8k_row
from cookbook.datasets.sharegpt import sharegpt_row
from kitchen.engine.errors import DataError
from kitchen.ports import DatasetStore
from kitchen.workflows.common.setup import GroupingConverter

RowConverter = Callable[[Mapping[str, Any], str], "dict[str, Any] | None"]


@dataclass(frozen=True)
class KnownDataset:
    """A hub dataset this project knows how to read."""

    source: str  # the store source, "org/name" or "org/name:config"
    kind: str  # chat | comparison | math | code
    convert: RowConverter
    test_split: str | None  # its held-out split; None: carve one off train (the recipe decides)
    skip_malformed: bool = False  # upstream has known broken rows, which tinker-cookbook drops


KNOWN: dict[str, KnownDataset] = {
    d.source: d
    for d in [
        KnownDataset("HuggingFaceH4/no_robots", "chat", no_robots_row, "test"),
        KnownDataset("allenai/tulu-3-sft-mixture", "chat", tulu3_row, None),
        KnownDataset("open-thoughts/OpenThoughts3-1.2M", "chat", sharegpt_row, None),
        # SDFT's demonstration sets, one (question, golden answer) conversation a row
        KnownDataset("hicai-zju/SciKnowEval", "chat", sciknoweval_row, None),
        KnownDataset("tangqiaoyu/ToolAlpaca", "chat", toolalpaca_row, None),
        KnownDataset("Anthropic/hh-rlhf", "comparison", hh_rlhf_row, "test"),
        KnownDataset("nvidia/HelpSteer3:preference", "comparison", helpsteer3_row, "validation"),
        KnownDataset(
            "argilla/ultrafeedback-binarized-preferences", "comparison", ultrafeedback_row, None
        ),
        KnownDataset(
            "allenai/llama-3.1-tulu-3-8b-preference-mixture",
            "comparison",
            tulu3_preference_row,
            None,
        ),
        KnownDataset("lmarena-ai/arena-human-preference-140k", "comparison", arena_row, None),
        # its rows pair up by prompt first (LoadDataset and convert_rows call `group`); the hub
        # set has a validation split, which tinker-cookbook does not use
        KnownDataset("nvidia/HelpSteer2", "comparison", helpsteer2_pairs, "validation"),
        KnownDataset("openai/gsm8k:main", "math", gsm8k_row, "test"),
        *(
            KnownDataset(f"EleutherAI/hendrycks_math:{config}", "math", hendrycks_math_row, "test")
            for config in HENDRYCKS_CONFIGS
        ),
        KnownDataset("HuggingFaceH4/MATH-500", "math", hendrycks_math_row, "test"),
        KnownDataset("zwhe99/DeepMath-103K", "math", deepmath_row, None),
        KnownDataset("POLARIS-Project/Polaris-Dataset-53K", "math", polaris_row, None),
        *(
            KnownDataset(
                f"agentica-org/DeepCoder-Preview-Dataset:{config}",
                "code",
                deepcoder_row,
                None,
                True,
            )
            for config in ("primeintellect", "taco", "lcbv5", "codeforces")
        ),
    ]
}

# Short names recipes accept (tinker-cookbook's DPO choices), resolved before loading.
ALIASES = {
    "hhh": "Anthropic/hh-rlhf",
    "helpsteer3": "nvidia/HelpSteer3:preference",
    "ultrafeedback": "argilla/ultrafeedback-binarized-preferences",
    "tulu3_preference": "allenai/llama-3.1-tulu-3-8b-preference-mixture",
    "arena": "lmarena-ai/arena-human-preference-140k",
    "helpsteer2": "nvidia/HelpSteer2",
    "no_robots": "HuggingFaceH4/no_robots",
    "tulu3": "allenai/tulu-3-sft-mixture",
    "openthoughts3": "open-thoughts/OpenThoughts3-1.2M",
    "gsm8k": "openai/gsm8k:main",
    "nvidia/HelpSteer3": "nvidia/HelpSteer3:preference",
    "openai/gsm8k": "openai/gsm8k:main",
}

GENERIC: dict[str, RowConverter] = {
    "chat": chat_row,
    "comparison": preference_row,
    "math": gsm8k_row,
    "code": deepcoder_row,
    "image_label": image_label_row,
}


def resolve_source(source: str) -> str:
    """An alias or a hub name without its config -> the store source to load."""
    return ALIASES.get(source, source)


def known_dataset(source: str) -> KnownDataset | None:
    """The known hub dataset `source` names, with or without its config."""
    resolved = resolve_source(source)
    if resolved in KNOWN:
        return KNOWN[resolved]
    base = resolved.partition(":")[0]
    return next((d for d in KNOWN.values() if d.source.partition(":")[0] == base), None)


def converter_for(source: str, kind: str) -> RowConverter:
    """The converter for `source`: a known hub dataset's own, else the generic one of `kind`."""
    known = known_dataset(source)
    if known is not None:
        if known.kind != kind:
            raise DataError(f"dataset {source} holds {known.kind} rows; expected {kind} rows")
        return known.convert
    if kind not in GENERIC:
        raise ValueError(f"kind {kind!r} is not one of {', '.join(GENERIC)}")
    return GENERIC[kind]


@dataclass
class Converted:
    """Rows after conversion, and how many were dropped as unusable (e.g. hh-rlhf pairs whose
    transcripts do not share a prompt, HelpSteer3 ties)."""

    rows: list[dict[str, Any]]
    skipped: int


def convert_rows(
    rows: Sequence[Mapping[str, Any]],
    convert: RowConverter,
    skip_malformed: bool = False,
    keep: Callable[[dict[str, Any]], bool] | None = None,
) -> Converted:
    """Apply `convert` to every row; rows it returns None for (or `keep` rejects) are skipped."""
    where = getattr(rows, "where", None)
    if isinstance(convert, GroupingConverter):  # HelpSteer2: its rows pair up first
        origin = _origin(rows)
        rows = convert.group(rows, where or (lambda i: f"row {i}"))
        where = lambda i: f"{origin} prompt group {i}"  # noqa: E731
    out: list[dict[str, Any]] = []
    skipped = 0
    for i, row in enumerate(rows):
        locator = where(i) if where is not None else f"row {i}"
        try:
            converted = convert(row, locator)
        except DataError:
            if not skip_malformed:
                raise
            converted = None
        if converted is None or (keep is not None and not keep(converted)):
            skipped += 1
            continue
        out.append(converted)
    if not out:
        raise DataError(f"{_origin(rows)}: no usable rows ({skipped} skipped)")
    return Converted(out, skipped)


def load_converted(
    store: DatasetStore,
    source: str,
    kind: str,
    split: str = "train",
    keep: Callable[[dict[str, Any]], bool] | None = None,
) -> Converted:
    """Load `source` through the store and convert its rows as `kind`."""
    resolved = resolve_source(source)
    known = known_dataset(resolved)
    rows = store.load(resolved, split)
    return convert_rows(
        rows,
        converter_for(resolved, kind),
        skip_malformed=bool(known and known.skip_malformed),
        keep=keep,
    )


def load_chat(store: DatasetStore, source: str, split: str = "train") -> list[dict[str, Any]]:
    """Conversations {"messages": [...]} (plus a dataset's metadata keys)."""
    return load_converted(store, source, "chat", split).rows


def load_comparisons(
    store: DatasetStore, source: str, split: str = "train", drop_ties: bool = True
) -> list[dict[str, Any]]:
    """Comparison rows (see comparison.py); ties dropped unless asked for."""
    keep = (lambda c: c["label"] != "Tie") if drop_ties else None
    return load_converted(store, source, "comparison", split, keep=keep).rows


def load_math(store: DatasetStore, source: str, split: str = "train") -> list[dict[str, Any]]:
    """Word problems {"question", "answer", "solution"}."""
    return load_converted(store, source, "math", split).rows


def load_code(store: DatasetStore, source: str, split: str = "train") -> list[dict[str, Any]]:
    """Code problems {"problem", "tests", "starter_code"}."""
    return load_converted(store, source, "code", split).rows


def load_prompts(
    store: DatasetStore, source: str, split: str = "train", limit: int | None = None
) -> list[str]:
    """The prompt of each row (`prompt_of`), the first `limit` of them; no rows is an error."""
    rows = store.load(resolve_source(source), split)
    where = getattr(rows, "where", lambda i: f"{source} ({split}) row {i}")
    prompts: list[str] = []
    for i, row in enumerate(rows):
        if limit is not None and len(prompts) >= limit:
            break
        prompts.append(prompt_of(row, where(i)))
    if not prompts:
        raise DataError(f"prompt dataset {source} ({split}) has no rows")
    return prompts


def prompt_of(row: Mapping[str, Any], where: str) -> str:
    """The prompt text of a row: "prompt" (the bundled `prompt_distill`), "question" (DeepMath,
    GSM8K) or the first user message of "messages" (Tulu3, chat data)."""
    for key in ("prompt", "question"):
        if isinstance(row.get(key), str) and row[key].strip():
            return str(row[key])
    for message in row.get("messages") or []:
        user = isinstance(message, Mapping) and message.get("role") == "user"
        if user and isinstance(message.get("content"), str):
            return str(message["content"])
    raise DataError(
        f"{where}: no prompt; expected a string field 'prompt' or 'question', or a user message"
    )


def _origin(rows: Sequence[Any]) -> str:
    return str(getattr(rows, "origin", "dataset"))
