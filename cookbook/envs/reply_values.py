"""Reading one value out of a model's reply: a regex finds it, a converter types it, and a reply
without one (no match, or text the converter rejects) gives None rather than an error."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def captured(match: re.Match[str] | None, convert: Callable[[str], T]) -> T | None:
    """`convert` of the match's first group; None when nothing matched or it raises ValueError."""
    if match is None:
        return None
    try:
        return convert(match.group(1))
    except ValueError:
        return None
