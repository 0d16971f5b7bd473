"""Pieces SFT and DPO share: the Evaluate report switch, Every.before_step, optional nodes,
OpenSamplingClient's naming, and workflows in parts."""

import asyncio
from typing import Any, ClassVar

from kitchen.engine.graph import Every
from kitchen.engine.stage import Context
from kitchen.workflows.common.clients import OpenSamplingClient
from kitchen.workflows.common.evaluate import Evaluate
from kitchen.workflows.common.parts import optional
from kitchen.workflows.common.setup import InitTrainingClient, LoadDataset
from kitchen.workflows.supervised import SupervisedConfig, SupervisedState, supervised_parts
from kitchen.workflows.supervised.stages import TokenizeConversations


class Half:
    """An Evaluator that reports half its input, so where the number lands is visible."""

    name: ClassVar[str] = "half"
    client: ClassVar[str] = "training"
    inputs: ClassVar[tuple[str, ...]] = ("step",)

    async def __call__(self, client: Any, /, *, step: int) -> dict[str, float]:
        return {"test/half": step / 2}


def _call(stage: Evaluate, state: SupervisedState) -> Any:
    return asyncio.run(stage(Context(state=state)))


def test_evaluate_hands_metrics_to_the_next_step_or_reports_them_at_the_end() -> None:
    state = SupervisedState(step=4, training_client=object())
    in_loop = Evaluate(evaluator=Half())  # type: ignore[arg-type]
    assert in_loop.name == "evaluate_half" and in_loop.writes == {"eval_metrics"}
    assert _call(in_loop, state) is None and state.eval_metrics == {"test/half": 2.0}
    assert state.eval_results == {}

    at_end = Evaluate(evaluator=Half(), report=True)  # type: ignore[arg-type]
    assert _call(at_end, state) == {"step": 4, "test/half": 2.0}
    assert state.eval_results == {"test/half": 2.0} and at_end.writes == {"eval_results"}

    unpipelined = Evaluate(evaluator=Half(), into=None)  # type: ignore[arg-type]
    assert _call(unpipelined, state) == {"test/half": 2.0} and unpipelined.writes == frozenset()


def test_before_step_is_true_on_steps_0_n_2n() -> None:
    before = Every.before_step(3)
    assert [s for s in range(8) if before(SupervisedState(step=s))] == [0, 3, 6]
    assert not Every.before_step(0)(SupervisedState(step=0))


def test_optional_splices_nodes_only_when_the_condition_holds() -> None:
    stage = OpenSamplingClient(base_model="m", into="teacher")
    assert optional(True, stage) == [stage] and optional(False, stage) == []
    assert stage.name == "open_teacher" and stage.writes == {"teacher"} and stage.reads == set()


def test_parts_let_a_workflow_swap_the_data_and_keep_the_training() -> None:
    cfg = SupervisedConfig(model_name="kitchen/tiny-llama", dataset="bundled:chat")
    parts = supervised_parts(cfg)
    assert [type(n) for n in parts.client] == [InitTrainingClient]
    assert all(isinstance(n, LoadDataset) for n in parts.data)
    assert isinstance(parts.train[0], TokenizeConversations)
    assert parts.nodes() == [*parts.client, *parts.data, *parts.train, *parts.finish]
