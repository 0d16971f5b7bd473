"""LabeledComparison -> (chosen, rejected) datum pairs, and the one owner of their layout.

A batch of pairs is interleaved [chosen_0, rejected_0, chosen_1, rejected_1, ...] (0.6.1
`DPODatasetBuilderFromComparisons` and `train_dpo.do_update` pair by even/odd index), as a
collator owns it in TRL: `build_dpo_data` lays the datums out, `PAIR` is the unit that batches
and shuffles move together, and `chosen_rejected` is the one split of anything per datum (datums,
logprobs, logratios) into its chosen and rejected halves. Each side is rendered as prompt +
completion, weights from the renderer, reduction "none" (DPO uses token-sum sequence logprobs, so
a mean would add a length bias), truncated from the right to max_length like any supervised datum.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeVar

from tinker import types

from train_core.preference.types import LabeledComparison
from train_core.supervised.datum import (
    SupervisedRenderer,
    build_example,
    datum_from_model_input_weights,
    datum_weights,
)

logger = logging.getLogger(__name__)

Overflow = Literal["truncate", "drop"]
DropReason = Literal["tie", "overflow", "no_completion_tokens", "too_short"]
DatumPair = tuple[types.Datum, types.Datum]
PAIR = 2  # datums per pair: a batch's unit, (chosen, rejected) side by side


class _Sliceable(Protocol):
    def __len__(self) -> int: ...
    def __getitem__(self, index: slice, /) -> Any: ...


Column = TypeVar("Column", bound=_Sliceable)  # per datum, in the batch's order: list, numpy, torch


@dataclass
class PairStats:
    """What happened to each comparison while building pairs (reported as metrics)."""

    num_pairs: int = 0
    num_truncated: int = 0  # kept, with at least one side cut to max_length
    dropped: dict[str, int] = field(default_factory=dict)  # DropReason -> count

    def metrics(self, prefix: str = "data") -> dict[str, float]:
        out = {f"{prefix}/num_pairs": float(self.num_pairs)}
        out[f"{prefix}/num_truncated"] = float(self.num_truncated)
        for reason, count in sorted(self.dropped.items()):
            out[f"{prefix}/dropped_{reason}"] = float(count)
        return out


def _build_pair(
    labeled: LabeledComparison,
    renderer: SupervisedRenderer,
    max_length: int | None,
    overflow: Overflow,
    train_on_what: Any,
) -> tuple[DatumPair, bool] | DropReason:
    if labeled.label == "Tie":
        return "tie"
    prompt = labeled.comparison.prompt_conversation
    pair: list[types.Datum] = []
    truncated = False
    for completion in labeled.chosen_and_rejected():
        model_input, weights = build_example(renderer, [*prompt, *completion], train_on_what)
        too_long = max_length is not None and model_input.length > max_length
        if too_long and overflow == "drop":
            return "overflow"
        truncated = truncated or too_long
        try:
            datum = datum_from_model_input_weights(model_input, weights, max_length, "none")
        except ValueError:
            return "too_short"
        if not (datum_weights(datum) > 0).any():
            return "no_completion_tokens"
        pair.append(datum)
    return (pair[0], pair[1]), truncated


def build_dpo_data(
    comparisons: Iterable[LabeledComparison],
    renderer: SupervisedRenderer,
    max_length: int | None,
    overflow: Overflow = "truncate",
    train_on_what: Any = None,
) -> tuple[list[types.Datum], PairStats]:
    """Interleaved [chosen_0, rejected_0, ...] datums and counts of kept/truncated/dropped pairs."""
    data: list[types.Datum] = []
    stats = PairStats()
    for labeled in comparisons:
        result = _build_pair(labeled, renderer, max_length, overflow, train_on_what)
        if isinstance(result, str):
            stats.dropped[result] = stats.dropped.get(result, 0) + 1
            continue
        pair, truncated = result
        data.extend(pair)
        stats.num_pairs += 1
        stats.num_truncated += int(truncated)
    if stats.dropped:
        logger.warning("preference pairs: kept %d, dropped %s", stats.num_pairs, stats.dropped)
    return data, stats


def chosen_rejected(values_D: Column) -> tuple[Column, Column]:
    """Per-datum values of an interleaved batch -> (chosen values, rejected values), pair by pair.
    An odd count is not a batch of pairs: it fails rather than drop a datum."""
    n = len(values_D)
    if n % PAIR:
        raise ValueError(
            f"preference pairs: {n} datums; expected interleaved (chosen, rejected) pairs, an even "
            "number"
        )
    return values_D[0::PAIR], values_D[1::PAIR]
