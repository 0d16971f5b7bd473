"""Which comparison rows a DPO run trains and evaluates on: tinker-cookbook's dataset names (hhh,
helpsteer3, ultrafeedback), bundled sets, hub names and local files, each with its row converter
and held-out split."""

from __future__ import annotations

from dataclasses import dataclass

from cookbook.datasets.catalog import converter_for, known_dataset, resolve_source
from kitchen.workflows.common.setup import RowConverter

# tinker-cookbook holds out 1024 comparisons; UltraFeedback has no test split, so its first 1024
# training rows are the held-out set (0.6.1 takes them after a seeded shuffle).
HELD_OUT = 1024


@dataclass(frozen=True)
class PreferenceData:
    """Where train and held-out comparisons come from and how their rows convert."""

    source: str
    split: str
    test_source: str | None
    test_split: str
    convert: RowConverter


def resolve_preference_dataset(name: str) -> PreferenceData:
    """hhh | helpsteer3 | ultrafeedback | bundled:NAME | a hub name | path.jsonl -> PreferenceData.

    A bundled set is held out on its "test" split; a local file or an unknown hub name has no
    held-out split unless the recipe names one (`test_dataset`).
    """
    source = resolve_source(name)
    convert = converter_for(source, "comparison")
    known = known_dataset(source)
    if known is not None:
        if known.test_split is not None:
            return PreferenceData(source, "train", source, known.test_split, convert)
        return PreferenceData(source, f"train[{HELD_OUT}:]", source, f"train[:{HELD_OUT}]", convert)
    if source.startswith("bundled:"):
        return PreferenceData(source, "train", source, "test", convert)
    return PreferenceData(source, "train", None, "test", convert)
