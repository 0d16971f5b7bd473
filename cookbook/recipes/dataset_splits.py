"""Which rows a recipe trains and evaluates on (chat or comparison rows): the names users of
tinker-cookbook and of crucible_kitchen know (no_robots, tulu3, hhh, helpsteer3, ultrafeedback),
bundled sets, hub names and local files, each with its row converter and held-out split.

A held-out set follows the training set (test_dataset "auto"): a known hub dataset is evaluated on
its own test split, or, when it has none (tulu3, ultrafeedback), on its first 1024 training rows,
which training then skips; a bundled set on its "test" split; a local file or an unknown hub name
has no held-out rows unless test_dataset names some.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar

from cookbook.datasets.catalog import converter_for, known_dataset, resolve_source
from kitchen.workflows.common.config import EpochTrainConfig
from kitchen.workflows.common.setup import RowConverter

# tinker-cookbook holds out 1024 comparisons; UltraFeedback has no test split, so its first 1024
# training rows are the held-out set (0.6.1 takes them after a seeded shuffle).
HELD_OUT = 1024


@dataclass(frozen=True)
class DatasetSplits:
    """Where train and held-out rows come from and how their rows convert."""

    source: str
    split: str
    test_source: str | None
    test_split: str
    convert: RowConverter


def resolve_dataset(name: str, kind: str) -> DatasetSplits:
    """A short name, a hub name, bundled:NAME or a local file -> its splits and converter."""
    source = resolve_source(name)
    convert = converter_for(source, kind)
    known = known_dataset(source)
    if known is not None:
        if known.test_split is not None:
            return DatasetSplits(source, "train", source, known.test_split, convert)
        return DatasetSplits(source, f"train[{HELD_OUT}:]", source, f"train[:{HELD_OUT}]", convert)
    if source.startswith("bundled:"):
        return DatasetSplits(source, "train", source, "test", convert)
    return DatasetSplits(source, "train", None, "test", convert)


E = TypeVar("E", bound=EpochTrainConfig)


@dataclass(frozen=True)
class DatasetBinding:
    """A recipe's `bind` (Recipe.bind): cfg with its dataset and test_dataset as the store sources
    and splits the run loads, for rows of `kind`; splits the user set win over the datasets' own.
    A bound cfg binds to itself."""

    kind: str

    def __call__(self, cfg: E) -> E:
        data = resolve_dataset(cfg.dataset, self.kind)
        test_source, test_split = data.test_source, data.test_split
        if cfg.test_dataset is None:
            test_source = None
        elif cfg.test_dataset != "auto":
            # a named held-out set: its own held-out split, else all of it (a local file)
            test = resolve_dataset(cfg.test_dataset, self.kind)
            test_source = test.test_source or test.source
            test_split = test.test_split if test.test_source else "train"
        explicit = cfg.model_fields_set
        return cfg.model_copy(
            update={
                "dataset": data.source,
                "dataset_split": cfg.dataset_split if "dataset_split" in explicit else data.split,
                "test_dataset": test_source,
                "test_split": cfg.test_split if "test_split" in explicit else test_split,
            }
        )


def row_converters(cfg: EpochTrainConfig, kind: str) -> tuple[RowConverter, RowConverter]:
    """The row converters of a bound cfg's train and held-out datasets."""
    convert = converter_for(cfg.dataset, kind)
    return convert, converter_for(cfg.test_dataset, kind) if cfg.test_dataset else convert
