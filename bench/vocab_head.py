"""The head computed by vocabulary blocks (kitchen/adapters/local/model/vocab.py) against one whole matrix
product, in one process: what the blocks cost at --nproc 1.

    .venv/bin/python bench/vocab_head.py                 # SmolLM2-135M's head: 49152 x 576, fp32
    .venv/bin/python bench/vocab_head.py --vocab 151936 --hidden 896 --reps 5

Per case, the median over `--reps` runs, each head alternating (wall and CPU time): a training
chunk (LOGIT_CHUNK_TOKENS positions through the head with its LoRA, rank 32 as the engine fuses
it, cross-entropy, forward and backward) and decode steps' forwards (8 and 32 rows, no grad).
Random weights: the time does not depend on their values.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any


def heads(vocab: int, hidden: int, rank: int) -> dict[str, Any]:
    """The same LoRA head twice: its base a plain Linear, and split by vocabulary blocks."""
    import copy

    import torch
    from peft import LoraConfig, get_peft_model

    from kitchen.adapters.local.model.lora import fuse_lora_forwards
    from kitchen.adapters.local.model.vocab import WholeRows, split_head

    class Head(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lm_head = torch.nn.Linear(hidden, vocab, bias=False)

        def forward(self, x: Any) -> Any:
            return self.lm_head(x)

    plain = Head().requires_grad_(False)
    split = copy.deepcopy(plain)
    split_head(split.lm_head, WholeRows(split.lm_head.weight))
    out = {}
    for name, module in (("whole", plain), ("blocks", split)):
        torch.manual_seed(0)
        model = get_peft_model(module, LoraConfig(r=rank, target_modules=["lm_head"]))
        fuse_lora_forwards(model)
        with torch.no_grad():
            for p in model.parameters():
                if p.requires_grad:
                    p.add_(0.01)
        out[name] = model
    return out


def main() -> None:
    import torch
    import torch.nn.functional as F

    from kitchen.adapters.local.train.logprobs import LOGIT_CHUNK_TOKENS

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vocab", type=int, default=49152)
    parser.add_argument("--hidden", type=int, default=576)
    parser.add_argument("--reps", type=int, default=9)
    args = parser.parse_args()
    models = heads(args.vocab, args.hidden, 32)
    torch.manual_seed(1)
    x = torch.randn(LOGIT_CHUNK_TOKENS, args.hidden)
    targets = torch.randint(0, args.vocab, (LOGIT_CHUNK_TOKENS,))

    def train(model: Any) -> None:
        h = x.clone().requires_grad_()
        F.cross_entropy(model(h).float(), targets, reduction="sum").backward()

    def decode(rows: int) -> Any:
        def run(model: Any) -> None:
            with torch.inference_mode():
                model(x[:rows])

        return run

    cases = [(f"train chunk ({LOGIT_CHUNK_TOKENS} positions)", train)]
    cases += [(f"decode forward ({rows} rows)", decode(rows)) for rows in (8, 32)]
    print(f"head {args.vocab} x {args.hidden}, {torch.get_num_threads()} threads")
    for label, run in cases:
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in models}
        for model in models.values():
            run(model)  # warm
        reps = args.reps if "train" in label else args.reps * 10
        for _ in range(reps):
            for name, model in models.items():
                wall, cpu = time.perf_counter(), time.process_time()
                run(model)
                times[name].append((time.perf_counter() - wall, time.process_time() - cpu))
        medians = {
            name: [statistics.median(t[i] for t in runs) * 1000 for i in (0, 1)]
            for name, runs in times.items()
        }
        (ww, wc), (bw, bc) = medians["whole"], medians["blocks"]
        print(
            f"{label}: whole {ww:.1f} ms ({wc:.1f} CPU), blocks {bw:.1f} ms ({bc:.1f} CPU): "
            f"{bw / ww:.2f}x wall, {bc / wc:.2f}x CPU"
        )


if __name__ == "__main__":
    main()
