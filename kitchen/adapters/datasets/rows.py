"""Rows that remember where each came from, and split strings with an optional slice.

Every loader returns `Rows`: a plain list of dicts (so callers can treat it as one) that also
answers `where(i)`, the phrase an error about row i should start with ("dataset file
data/chat.jsonl:17"), so a converter several layers away can still name file and line.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from kitchen.engine.errors import DataError


class Rows(list[dict[str, Any]]):
    """A list of row dicts plus the origin of each row, for error messages.

    `lines[i]` is the 1-based line of row i in a JSONL file; sources without lines (parquet, arrow,
    hub) leave it None and `where(i)` names the row's index in the source instead.
    """

    def __init__(
        self,
        rows: Iterable[dict[str, Any]],
        origin: str,
        lines: list[int] | None = None,
        indices: list[int] | None = None,
    ) -> None:
        super().__init__(rows)
        self.origin = origin  # "dataset file data/chat.jsonl" or "dataset org/name (train)"
        self.lines = lines
        self.indices = indices  # index of each row in the source, when rows were sliced off it

    def where(self, i: int) -> str:
        """The locator for row i: "dataset file x.jsonl:17" or "dataset org/name (train) row 3"."""
        if self.lines is not None:
            return f"{self.origin}:{self.lines[i]}"
        return f"{self.origin} row {self.indices[i] if self.indices is not None else i}"

    def sliced(self, start: int | None, stop: int | None) -> Rows:
        """Rows[start:stop], each row still pointing at its place in the source."""
        picked = list(range(len(self)))[start:stop]
        return Rows(
            [self[i] for i in picked],
            self.origin,
            lines=None if self.lines is None else [self.lines[i] for i in picked],
            indices=[self.indices[i] if self.indices is not None else i for i in picked],
        )


_SPLIT_RE = re.compile(r"^(?P<name>[A-Za-z0-9_.\-]+)(?:\[(?P<start>-?\d*):(?P<stop>-?\d*)\])?$")


@dataclass(frozen=True)
class SplitSpec:
    """A split name with an optional integer slice: "train", "test[:100]", "train[10:20]"."""

    name: str
    start: int | None = None
    stop: int | None = None

    @property
    def is_sliced(self) -> bool:
        return self.start is not None or self.stop is not None


def parse_split(split: str) -> SplitSpec:
    """Parse "NAME" or "NAME[start:stop]" (integers; either side may be empty)."""
    match = _SPLIT_RE.match(split.strip())
    if match is None:
        raise DataError(
            f'split "{split}" is not understood; expected a name with an optional integer slice, '
            'e.g. "train", "test", "train[:100]"'
        )
    start, stop = match["start"], match["stop"]
    return SplitSpec(
        name=match["name"],
        start=int(start) if start else None,
        stop=int(stop) if stop else None,
    )
