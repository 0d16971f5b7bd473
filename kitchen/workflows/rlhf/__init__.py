"""RLHF with a learned pairwise preference model: a run of sections (SFT, preference model, RL),
each its own workflow in its own folder, handing on checkpoint paths through checkpoints.jsonl."""

from kitchen.workflows.rlhf.sections import RunSection, SectionPaths
from kitchen.workflows.rlhf.state import RLHFState
from kitchen.workflows.rlhf.workflow import preference_rl, sectioned

__all__ = ["RLHFState", "RunSection", "SectionPaths", "preference_rl", "sectioned"]
