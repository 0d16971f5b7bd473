"""Reinforcement learning: envs -> rollouts -> advantages -> datums -> policy-gradient steps, in
sync, streaming and async modes; code RL is this plus a sandbox and a pass@k evaluator, and agent
RL (AgentRLConfig) this with agent groups rolled out through the run's agent gateway."""

from kitchen.workflows.reinforcement.config import (
    AgentConfig,
    AgentRLConfig,
    CodeRLWorkflowConfig,
    RLConfig,
    RLLoopConfig,
    RLMode,
)
from kitchen.workflows.reinforcement.state import CodeRLState, RLState
from kitchen.workflows.reinforcement.workflow import reinforcement

__all__ = [
    "AgentConfig",
    "AgentRLConfig",
    "CodeRLState",
    "CodeRLWorkflowConfig",
    "RLConfig",
    "RLLoopConfig",
    "RLMode",
    "RLState",
    "reinforcement",
]
