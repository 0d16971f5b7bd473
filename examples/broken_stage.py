"""A workflow that is wrong on purpose: it fails validation before anything runs.

    python examples/broken_stage.py          # exits with GraphError, naming the field and who writes it
    kitchen graph examples/broken_stage.py   # prints the plan, then the same error (exit 2)

`print_batch_size` reads `batch`, but sits in the loop body before `GetBatch`, the stage that
writes it: on the first iteration nothing has produced `batch` yet. `kitchen.validate` (which
every run calls first, before any backend is created) walks every path through the graph and
reports, in one line, the stage, the field, and the stages that would produce it:

    stage print_batch_size reads 'batch', which no earlier stage writes on every path
    (written by: get_batch)

The fix is to move `print_batch_size` after `GetBatch`.
"""

from __future__ import annotations

import kitchen
from kitchen import Await, Context, Loop, Workflow
from kitchen.workflows.common.batches import GetBatch, ShuffleEpoch
from kitchen.workflows.common.setup import InitTrainingClient, LoadDataset
from kitchen.workflows.common.train_step import LogTrainStep, SubmitTrainStep
from kitchen.workflows.supervised.stages import CrossEntropyLoss, TokenizeConversations
from kitchen.workflows.supervised.state import SupervisedState


@kitchen.stage(reads={"batch"})
def print_batch_size(ctx: Context[SupervisedState]) -> None:
    print(f"batch of {len(ctx.state.batch or [])} datums")


def build_workflow() -> Workflow[SupervisedState]:
    return Workflow(
        "broken_stage",
        SupervisedState,
        nodes=[
            InitTrainingClient("kitchen/tiny-llama", lora_rank=8),
            LoadDataset("bundled:chat", "conversations", limit=16),
            TokenizeConversations(batch_size=4, max_length=64, with_test=False),
            ShuffleEpoch(),
            Loop("batch", "n_batches", "batch_idx", steps=True, body=[
                print_batch_size,  # the mistake: reads `batch` before GetBatch writes it
                GetBatch(batch_size=4),
                SubmitTrainStep(loss=CrossEntropyLoss(), learning_rate=1e-3),
                Await("step_queue", into="step_result"),
                LogTrainStep(),
            ]),
        ],
    )  # fmt: skip


if __name__ == "__main__":
    kitchen.run_workflow(build_workflow(), backend="fake")
