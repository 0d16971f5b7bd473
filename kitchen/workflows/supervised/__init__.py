"""Supervised fine-tuning: conversations -> datums -> pipelined cross-entropy steps."""

from kitchen.workflows.supervised.config import SupervisedConfig, TrainOnWhatName
from kitchen.workflows.supervised.state import SupervisedState
from kitchen.workflows.supervised.workflow import (
    setup,
    supervised,
    supervised_flat,
    supervised_parts,
)

__all__ = [
    "SupervisedConfig",
    "SupervisedState",
    "TrainOnWhatName",
    "setup",
    "supervised",
    "supervised_flat",
    "supervised_parts",
]
