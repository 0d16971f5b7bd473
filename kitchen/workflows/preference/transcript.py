"""The pairs transcript: a few (chosen, rejected) pairs of each logged DPO step, with their
implicit rewards, appended to `<log_dir>/pairs.jsonl` (what `kitchen report` shows).

A pair's implicit reward is beta * (logp_policy - logp_ref) of each completion (sequence logprobs
weighted as the loss weights them); its margin is chosen_reward - rejected_reward, the quantity
the DPO loss pushes above zero. The policy is the step's pre-update weights, the ones the loss saw.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from tinker import types

from kitchen.engine.stage import Context, Metrics
from train_core.preference import PAIR, chosen_rejected, pair_logratios, weighted_logprob_sums
from train_core.scoring import full_sequence
from train_core.supervised import datum_weights

REFERENCE = "reference_logprobs"  # the loss_fn_outputs key beside the policy's "logprobs"


def with_reference(
    out: types.ForwardBackwardOutput, reference_D: Sequence[Any]
) -> types.ForwardBackwardOutput:
    """The step's output with each datum's reference logprobs beside the policy's, so the pairs
    transcript sees what the loss compared (the pipelined step is logged a step later, when the
    state's reference logprobs already belong to the next batch)."""
    outputs = [
        {**o, REFERENCE: types.TensorData.from_numpy(np.asarray(r, dtype=np.float32))}
        for o, r in zip(out.loss_fn_outputs, reference_D, strict=True)
    ]
    return types.ForwardBackwardOutput(
        loss_fn_output_type=out.loss_fn_output_type, loss_fn_outputs=outputs, metrics=out.metrics
    )


def _split(datum: types.Datum, tokenizer: Any) -> tuple[str, str]:
    """(prompt, completion) text: the completion starts at the first weighted target."""
    tokens = full_sequence(datum).to_ints()
    weighted = np.flatnonzero(datum_weights(datum) > 0)
    start = int(weighted[0]) + 1 if weighted.size else len(tokens)
    return str(tokenizer.decode(tokens[:start])), str(tokenizer.decode(tokens[start:]))


def pair_records(
    step: int,
    data: list[types.Datum],
    out: types.ForwardBackwardOutput,
    tokenizer: Any,
    beta: float,
    max_pairs: int,
) -> list[dict[str, Any]]:
    """The first `max_pairs` pairs of an interleaved [chosen_0, rejected_0, ...] step."""
    n = min(len(data) // PAIR, max_pairs) * PAIR
    outputs = out.loss_fn_outputs[:n]
    if n == 0 or any(REFERENCE not in o for o in outputs):
        return []
    chosen_B, rejected_B = pair_logratios(
        weighted_logprob_sums([o["logprobs"] for o in outputs], data[:n]),
        weighted_logprob_sums([o[REFERENCE] for o in outputs], data[:n]),
    )
    records = []
    for b, (chosen, rejected) in enumerate(zip(*chosen_rejected(data[:n]), strict=True)):
        prompt, chosen_text = _split(chosen, tokenizer)
        _, rejected_text = _split(rejected, tokenizer)
        chosen_reward, rejected_reward = float(beta * chosen_B[b]), float(beta * rejected_B[b])
        records.append(
            {
                "step": step,
                "pair": b,
                "prompt": prompt,
                "chosen": chosen_text,
                "rejected": rejected_text,
                "chosen_reward": chosen_reward,
                "rejected_reward": rejected_reward,
                "margin": chosen_reward - rejected_reward,
            }
        )
    return records


@dataclass(frozen=True, kw_only=True)
class WritePairs:
    """Up to `max_pairs` pairs of the step just awaited, appended to `<log_dir>/pairs.jsonl`."""

    beta: float
    max_pairs: int = 4
    name: str = "write_pairs"
    reads: frozenset[str] = frozenset({"step_result", "tokenizer"})
    writes: frozenset[str] = frozenset()

    def __call__(self, ctx: Context[Any]) -> Metrics | None:
        done = ctx.state.step_result
        if ctx.log_dir is None or done is None or done.fb is None:
            return None
        records = pair_records(
            done.step, done.data, done.fb, ctx.state.tokenizer, self.beta, self.max_pairs
        )
        with (Path(ctx.log_dir) / "pairs.jsonl").open("a") as f:
            for record in records:
                f.write(json.dumps(record) + "\n")
        return None
