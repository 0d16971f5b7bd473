"""Write search_tool's warm-start demonstrations (cookbook.envs.search_demos) as chat JSONL for
sl_basic:

    python scripts/search_tool_demos.py OUT.jsonl [--seed 0] [--limit N] [--two-hop]

--two-hop: demonstrations of bundled:search_two_hop, each searching twice (the question, then
the founder its result names).

The tool declaration is rendered by chatml (SmolLM2's renderer), the one the RL prompts use."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from cookbook.envs.search_demos import search_demos, two_hop_demos
from kitchen.adapters.datasets import HFDatasetStore
from kitchen.adapters.fake.tokenizer import FakeTokenizer
from train_core.renderers import get_renderer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--renderer", default="chatml")
    parser.add_argument("--two-hop", action="store_true", help="bundled:search_two_hop")
    args = parser.parse_args()
    # The tool declaration is text only; the renderer's tokenizer never runs here.
    renderer = get_renderer(args.renderer, FakeTokenizer())
    make = two_hop_demos if args.two_hop else search_demos
    rows = make(HFDatasetStore(), renderer, seed=args.seed, limit=args.limit)
    with args.out.open("w", encoding="utf-8", newline="\n") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    print(f"{len(rows)} demonstrations -> {args.out}")


if __name__ == "__main__":
    main()
