"""Run a tinker-cookbook module unchanged, with the Hugging Face datasets it loads answered from a
few rows here, or from a bundled image set (the hub is offline in tests):

    python -m tests.cookbook_compat.offline_data tinker_cookbook.recipes.sl_loop key=value ...

Only `datasets.load_dataset` is replaced, and only for the names below; any other name fails as it
would offline. KITCHEN_OFFLINE_ROWS=N repeats each split's rows up to N, for recipes whose default
batch (256) would otherwise see no full batch.
"""

from __future__ import annotations

import itertools
import os
import runpy
import sys
from typing import Any

import datasets

_TURNS = [("What is 2 + 3?", "2 + 3 = 5."), ("Name a colour.", "Blue."), ("Say hi.", "Hi!")]
_SPLITS: dict[str, dict[str, list[dict[str, Any]]]] = {
    "HuggingFaceH4/no_robots": {
        split: [
            {"messages": [{"role": "user", "content": q}, {"role": "assistant", "content": a}]}
            for q, a in _TURNS + _TURNS[:1]
        ]
        for split in ("train", "test")
    },
    "openai/gsm8k": {
        "train": [
            {"question": f"What is {x} + {y}?", "answer": f"{x} + {y} = {x + y}\n#### {x + y}"}
            for x, y in [(2, 3), (4, 1)]
        ]
    },
    "Anthropic/hh-rlhf": {
        split: [
            {
                "chosen": f"\n\nHuman: {q}\n\nAssistant: {a}",
                "rejected": f"\n\nHuman: {q}\n\nAssistant: No.",
            }
            for q, a in _TURNS
        ]
        for split in ("train", "test")
    },
    "zwhe99/DeepMath-103K": {"train": [{"question": q} for q, _ in _TURNS]},
}


# Image classification sets (tinker-cookbook's vlm_classifier) answered by a bundled image set: an
# image column and an integer label column with its class names, as the hub's sets have them.
_IMAGE_SETS = {"dpdl-benchmark/caltech101": "bundled:shapes"}


def _image_splits(source: str) -> datasets.DatasetDict:
    import base64

    from kitchen.adapters.datasets import HFDatasetStore

    store = HFDatasetStore()
    rows = {split: store.load(source, split) for split in ("train", "test")}
    names = sorted({r["label"] for r in rows["train"]})
    features = datasets.Features(
        {"image": datasets.Image(), "label": datasets.ClassLabel(names=names)}
    )

    def cell(row: dict[str, Any]) -> dict[str, Any]:
        data = base64.b64decode(row["image"].partition(",")[2])
        return {"image": {"bytes": data, "path": None}, "label": names.index(row["label"])}

    return datasets.DatasetDict(
        {
            split: datasets.Dataset.from_list([cell(r) for r in split_rows], features=features)
            for split, split_rows in rows.items()
        }
    )


def load_dataset(path: str, *args: Any, split: str | None = None, **kwargs: Any) -> Any:
    if path in _IMAGE_SETS:
        images = _image_splits(_IMAGE_SETS[path])
        return images if split is None else images[split]
    if path not in _SPLITS:
        raise FileNotFoundError(f"{path}: not among the offline test datasets")
    least = int(os.environ.get("KITCHEN_OFFLINE_ROWS", "0"))
    splits = {
        name: datasets.Dataset.from_list(
            list(itertools.islice(itertools.cycle(rows), max(least, len(rows))))
        )
        for name, rows in _SPLITS[path].items()
    }
    if split is None:
        return datasets.DatasetDict(splits)
    if split not in splits:
        raise ValueError(f"{path} has no split {split!r} offline")
    return splits[split]


if __name__ == "__main__":
    datasets.load_dataset = load_dataset
    module, sys.argv = sys.argv[1], [sys.argv[1], *sys.argv[2:]]
    runpy.run_module(module, run_name="__main__", alter_sys=True)
