"""A workflow holds nodes (a step is a training step); `steps=` still builds one as before."""

import pytest

from kitchen.engine.graph import Workflow

from .states import Load, Mark, ToyState


def test_nodes_and_the_old_steps_keyword_build_the_same_workflow():
    nodes = [Load(), Mark("a")]
    assert Workflow("toy", ToyState, nodes=nodes) == Workflow("toy", ToyState, steps=nodes)
    assert Workflow("toy", ToyState, nodes).nodes is nodes  # positional, as most factories pass it


def test_a_workflow_takes_its_nodes_once():
    with pytest.raises(TypeError, match="pass its nodes once"):
        Workflow("toy", ToyState, nodes=[Load()], steps=[Load()])
    with pytest.raises(TypeError, match="pass its nodes once"):
        Workflow("toy", ToyState)
