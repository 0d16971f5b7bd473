"""on_backend: the recipes whose envs sample a second model build their env dataset with the
run's backend, and a workflow without exactly one dataset stage is refused."""

from __future__ import annotations

import pytest

from cookbook.recipes.on_backend import BuildRLDatasetOnBackend, on_backend
from kitchen.app.resolve import resolve_config
from kitchen.engine.graph import Workflow
from kitchen.workflows.reinforcement.state import RLState


@pytest.mark.parametrize("recipe", ["twenty_questions", "rubric", "text_arena"])
def test_the_dataset_stage_asks_for_the_backend_port(recipe):
    nodes = resolve_config(recipe).workflow.nodes
    built = [n for n in nodes if isinstance(n, BuildRLDatasetOnBackend)]
    assert len(built) == 1 and "backend" in built[0].ports


def test_a_workflow_without_a_dataset_stage_is_refused():
    with pytest.raises(TypeError, match="0 build_rl_dataset stages; expected 1"):
        on_backend(Workflow("empty", RLState, nodes=[]))
