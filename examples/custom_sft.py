"""A custom supervised fine-tuning workflow: Kitchen's built-in SFT stages plus stages of your own.

    python examples/custom_sft.py                  # local engine, tiny model, 6 steps on CPU
    python examples/custom_sft.py --backend fake   # the test oracle: no model at all
    kitchen graph examples/custom_sft.py           # print the plan without running it

Two custom stages show the two ways to write one:
- `KeepShortConversations`, a frozen dataclass whose options are constructor fields. It runs once,
  between loading and tokenising, and keeps conversations of at most `max_messages` messages.
- `count_loss_tokens`, a plain function made a stage by `@kitchen.stage`. It runs every step and
  keeps a running total in `loss_tokens_seen`, a field this example adds to the supervised state.

Each declares what it reads and writes, so `kitchen.validate` can check the wiring before any
model loads, and the runner refuses a read or write that the stage did not declare.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from pydantic import Field
from tinker.types import Datum

import kitchen
from kitchen import Await, Context, Loop, Metrics, Workflow
from kitchen.workflows.common.batches import GetBatch, ShuffleEpoch
from kitchen.workflows.common.checkpoint import SaveFinal
from kitchen.workflows.common.setup import InitTrainingClient, LoadDataset
from kitchen.workflows.common.train_step import LogTrainStep, SubmitTrainStep
from kitchen.workflows.supervised.stages import CrossEntropyLoss, TokenizeConversations
from kitchen.workflows.supervised.state import SupervisedState
from train_core import datum_weights

MODEL = "kitchen/tiny-llama"
BATCH_SIZE = 8


@dataclass(frozen=True)
class KeepShortConversations:
    """Keep conversations of at most `max_messages` messages (single-turn chats by default)."""

    max_messages: int = 2
    name: str = "keep_short_conversations"
    reads: frozenset[str] = frozenset({"conversations"})
    writes: frozenset[str] = frozenset({"conversations"})

    def __call__(self, ctx: Context[SupervisedState]) -> Metrics:
        rows = ctx.state.conversations or []
        kept = [row for row in rows if len(row["messages"]) <= self.max_messages]
        ctx.state.conversations = kept
        return {"data/kept": len(kept), "data/dropped": len(rows) - len(kept)}


class CountingState(SupervisedState):
    """The supervised state plus one field of ours. A default that is a real value (0) makes it
    readable before any stage writes it; a default of None would mean "not produced yet"."""

    loss_tokens_seen: int = Field(0, description="Tokens that carried loss, over all steps so far")


@kitchen.stage(reads={"batch", "loss_tokens_seen"}, writes={"loss_tokens_seen"})
def count_loss_tokens(ctx: Context[CountingState]) -> None:
    """Add the tokens that carry loss in this step's batch (the assistant's answers)."""
    batch: list[Datum] = ctx.state.batch or []
    ctx.state.loss_tokens_seen += sum(int((datum_weights(d) > 0).sum()) for d in batch)


def build_workflow(
    model: str = MODEL, rows: int = 96, learning_rate: float = 5e-4
) -> Workflow[CountingState]:
    """One epoch over the first `rows` bundled chats, pipelined as Kitchen's sl_basic: step N+1
    is submitted before step N is awaited (`Await(..., keep=1)`), then the queue is drained."""
    drain = [Await("step_queue", into="step_result"), LogTrainStep()]
    return Workflow(
        "custom_sft",
        CountingState,
        nodes=[
            InitTrainingClient(model, lora_rank=8),
            LoadDataset("bundled:chat", "conversations", limit=rows),
            KeepShortConversations(max_messages=2),
            TokenizeConversations(batch_size=BATCH_SIZE, max_length=128, with_test=False),
            Loop("epoch", 1, "epoch_idx", [
                ShuffleEpoch(seed=0),
                Loop("batch", "n_batches", "batch_idx", steps=True, body=[
                    GetBatch(batch_size=BATCH_SIZE),
                    count_loss_tokens,
                    SubmitTrainStep(loss=CrossEntropyLoss(), learning_rate=learning_rate, lr_schedule="constant"),
                    Await("step_queue", into="step_result", keep=1),
                    LogTrainStep(),
                ]),
            ]),
            *drain,
            SaveFinal(),
        ],
    )  # fmt: skip


def main(argv: list[str] | None = None) -> kitchen.RunResult:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--backend", default="local", help="local | fake | tinker")
    parser.add_argument("--log-dir", default="runs/examples/custom_sft", help="run directory")
    args = parser.parse_args(argv)
    log_dir = args.log_dir
    result = kitchen.run_workflow(
        build_workflow(), backend=args.backend, log_dir=log_dir, if_exists="delete"
    )
    train = [m for m in result.metrics if "train_mean_nll" in m]
    print(f"{result.steps} steps; run directory {log_dir}")
    print(f"train_mean_nll {train[0]['train_mean_nll']:.3f} -> {train[-1]['train_mean_nll']:.3f}")
    state = result.state
    assert isinstance(state, CountingState)
    print(f"tokens that carried loss: {state.loss_tokens_seen}")
    return result


if __name__ == "__main__":
    main()
