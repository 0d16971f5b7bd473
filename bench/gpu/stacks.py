"""Summarize a py-spy raw profile (collapsed stacks, optionally gzipped): the top leaf frames of all
samples, and of the samples under each frame named.

    python bench/gpu/stacks.py PROFILE [FRAME_SUBSTRING ...]
    python bench/gpu/stacks.py bench/gpu/measured-2026-11-26/dpo_kitchen.txt.gz sdpa_attention
"""

from __future__ import annotations

import collections
import gzip
import sys
from pathlib import Path

TOP = 12


def read_stacks(path: Path) -> list[tuple[list[str], int]]:
    """(frames outermost first, samples) of each line `frame;frame;... count`."""
    opener = gzip.open if path.suffix == ".gz" else open
    rows = []
    with opener(path, "rt") as f:
        for line in f:
            stack, _, count = line.rstrip().rpartition(" ")
            if stack:
                rows.append((stack.split(";"), int(count)))
    return rows


def summary(rows: list[tuple[list[str], int]], frames: list[str]) -> list[str]:
    total = sum(n for _, n in rows)
    lines = [f"{total} samples"]
    for key in frames or [""]:
        under = [(s, n) for s, n in rows if any(key in frame for frame in s)]
        leaves: collections.Counter[str] = collections.Counter()
        for stack, n in under:
            leaves[stack[-1][:120]] += n
        lines.append(f"== under {key or 'everything'}: {sum(n for _, n in under) / total:.1%}")
        lines += [f"  {n / total:6.1%}  {leaf}" for leaf, n in leaves.most_common(TOP)]
    return lines


def main() -> None:
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    print("\n".join(summary(read_stacks(Path(sys.argv[1])), sys.argv[2:])))


if __name__ == "__main__":
    main()
