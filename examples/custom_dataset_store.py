"""A custom dataset store adapter: CSV files of question,answer rows, read as chat conversations.

    python examples/custom_dataset_store.py                  # sl_loop on examples/data/kitchen_units.csv
    python examples/custom_dataset_store.py --backend fake   # the test oracle: no model at all

A dataset store is anything with a `name` and `load(source, split) -> rows` (the `DatasetStore`
port in kitchen/ports.py); stages reach it as `ctx.datasets`. This one reads `*.csv` itself and
hands every other source to the store it wraps: Kitchen's default "hf" store (bundled:NAME, local
JSONL/parquet files, the Hugging Face hub). The recipe is untouched: the built-in `sl_loop` runs
on the CSV because its rows come out in the shape it reads, {"messages": [...]}.

To make it installable by name, register the class in the `kitchen.dataset_stores` entry-point
group of your package (like examples/custom_recipe_pkg does for a recipe):

    [project.entry-points."kitchen.dataset_stores"]
    csv_chat = "my_package.stores:CsvChatStore"
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path
from typing import Any

import kitchen
from kitchen import DataError, Workflow
from kitchen.ports import DatasetStore

DATA = Path(__file__).resolve().parent / "data" / "kitchen_units.csv"
COLUMNS = ("question", "answer")


class CsvChatStore:
    """`*.csv` with question,answer columns -> one-turn conversations; anything else -> `fallback`.

    Split "train" is the file itself; split S of `x.csv` is its sibling `x_S.csv` (the convention of
    Kitchen's own store, so a test split never silently reads training rows).
    """

    name = "csv_chat"

    def __init__(self, fallback: DatasetStore | None = None) -> None:
        self.fallback = fallback or kitchen.DATASET_STORES.get("hf")()

    def load(self, source: str, split: str = "train") -> list[dict[str, Any]]:
        if not source.endswith(".csv"):
            return list(self.fallback.load(source, split))
        path = Path(source)
        if split != "train":
            path = path.with_name(f"{path.stem}_{split}.csv")
        if not path.is_file():
            raise DataError(f"dataset file {path} (split {split!r}) does not exist")
        with path.open(newline="") as f:
            reader = csv.DictReader(f)
            missing = [c for c in COLUMNS if c not in (reader.fieldnames or [])]
            if missing:
                raise DataError(
                    f"{path}:1: header lacks column {', '.join(missing)}; expected question,answer"
                )
            return [self._row(row, f"{path}:{line}") for line, row in enumerate(reader, start=2)]

    @staticmethod
    def _row(row: dict[str, str | None], where: str) -> dict[str, Any]:
        question, answer = ((row.get(c) or "").strip() for c in COLUMNS)
        if not question or not answer:
            empty = "question" if not question else "answer"
            raise DataError(f"{where}: column {empty!r} is empty; expected text")
        return {
            "messages": [
                {"role": "user", "content": question},
                {"role": "assistant", "content": answer},
            ]
        }


OVERRIDES: dict[str, Any] = {
    "model_name": "kitchen/tiny-llama",
    "dataset": str(DATA),
    "batch_size": 8,
    "num_epochs": 3,
    "max_length": 64,
    "lora_rank": 8,
    "learning_rate": 1e-3,
    "save_every": 0,
    "register_model": False,
}


def build_workflow() -> Workflow[Any]:
    """The plan `main` runs: the registered sl_loop recipe's workflow for these overrides."""
    recipe = kitchen.RECIPES.get("sl_loop")()
    return recipe.workflow(recipe.bind(recipe.Config.model_validate(OVERRIDES)))


def main(argv: list[str] | None = None) -> kitchen.RunResult:
    parser = argparse.ArgumentParser(description="sl_loop on a CSV, through a custom dataset store")
    parser.add_argument("--backend", default="local", help="local | fake | tinker")
    parser.add_argument("--csv", default=str(DATA), help="question,answer CSV to train on")
    parser.add_argument("--log-dir", default="runs/examples/custom_dataset_store")
    args = parser.parse_args(argv)
    result = kitchen.run(
        "sl_loop",
        {**OVERRIDES, "dataset": args.csv},
        backend=args.backend,
        datasets=CsvChatStore(),
        log_dir=args.log_dir,
        if_exists="delete",
    )
    nll = [m["train_mean_nll"] for m in result.metrics if "train_mean_nll" in m]
    print(f"{result.steps} steps on {args.csv}: train_mean_nll {nll[0]:.3f} -> {nll[-1]:.3f}")
    return result


if __name__ == "__main__":
    main()
