import pytest

from kitchen.engine.errors import GraphError
from kitchen.engine.graph import Await, Every, Loop, When, Workflow
from kitchen.engine.stage import stage

from .states import Add, Load, Mark, Submit, ToyState


def test_sound_workflow_validates():
    wf = Workflow(
        "toy",
        ToyState,
        [
            Load(),
            Loop(
                "batch", "n_items", "batch_idx", [Add(), Submit(), Await("fut", into="fut_result")]
            ),
        ],
    )
    wf.validate(ports={"backend", "datasets"})


def test_unknown_field_gets_a_suggestion():
    bad = stage(reads={"itemz"})(lambda ctx: None)
    wf = Workflow("toy", ToyState, [Load(), bad])
    with pytest.raises(
        GraphError, match=r"field 'itemz' is not on ToyState; did you mean 'items'\?"
    ):
        wf.validate()


def test_read_before_any_producer_names_the_would_be_producer():
    wf = Workflow("toy", ToyState, [Loop("batch", 3, "batch_idx", [Add()]), Load()])
    with pytest.raises(
        GraphError,
        match=r"stage add reads 'items', which no earlier stage writes on every path \(written by: load\)",
    ):
        wf.validate()


def test_write_inside_when_is_not_available_after_it():
    wf = Workflow(
        "toy", ToyState, [When(Every(2), [Load()]), Loop("batch", 3, "batch_idx", [Add()])]
    )
    with pytest.raises(GraphError, match="reads 'items'"):
        wf.validate()


def test_pending_never_awaited():
    wf = Workflow("toy", ToyState, [Loop("batch", 3, "batch_idx", [Submit()])])
    with pytest.raises(GraphError, match=r"pending 'fut' is never awaited"):
        wf.validate()


def test_pipelined_loop_awaiting_previous_iteration_is_valid():
    # submit N, await N-1 at the top of the next iteration, final await after the loop
    body = [Await("fut", into="fut_result"), Submit()]
    Workflow(
        "toy", ToyState, [Loop("batch", 3, "batch_idx", body), Await("fut", into="fut_result")]
    ).validate()


def test_pending_awaited_only_in_a_when_branch_is_reported():
    wf = Workflow("toy", ToyState, [Submit(), When(Every(2), [Await("fut")])])
    with pytest.raises(GraphError, match="never awaited"):
        wf.validate()


def test_missing_port():
    needs = stage(ports={"sandbox"})(lambda ctx: None)
    wf = Workflow("toy", ToyState, [needs])
    with pytest.raises(GraphError, match="needs port 'sandbox', which is not configured"):
        wf.validate(ports={"backend"})


def test_render_shows_structure_and_bound_options():
    wf = Workflow(
        "toy",
        ToyState,
        [
            Load(n=5),
            Loop("batch", "n_items", "batch_idx", [Add(), When(Every(2), [Mark("x")])], steps=True),
        ],
        finally_=[Mark("end")],
    )
    plan = wf.render()
    assert "load(n=5)" in plan
    assert "loop batch over n_items -> batch_idx [steps]" in plan
    assert "when every 2 (batch_idx)" in plan
    assert plan.splitlines()[-2] == "finally"
    assert "[items,n_items" not in plan  # reads -> writes shown as [reads -> writes]
    assert "[- -> items,n_items]" in plan


def test_pending_queue_must_be_drained_after_a_pipelined_loop():
    from kitchen.engine.futures import APIFuture
    from kitchen.engine.state import BaseState, PendingQueue

    class QState(BaseState):
        batch_idx: int = 0
        q: PendingQueue[int]
        out: int | None = None

    push = stage(reads={"batch_idx"}, writes={"q"})(
        lambda ctx: setattr(
            ctx.state, "q", [*ctx.state.q, APIFuture.completed(ctx.state.batch_idx)]
        )
    )
    body = [push, Await("q", into="out", keep=1)]
    with pytest.raises(GraphError, match="pending 'q' is never awaited"):
        Workflow("pipe", QState, [Loop("batch", 3, "batch_idx", body)]).validate()
    wf = Workflow("pipe", QState, [Loop("batch", 3, "batch_idx", body), Await("q", into="out")])
    wf.validate()

    from kitchen.engine.runner import execute
    from kitchen.engine.stage import Context

    seen = []
    record = stage(reads={"out"})(lambda ctx: seen.append(ctx.state.out))
    wf = Workflow(
        "pipe",
        QState,
        [Loop("batch", 3, "batch_idx", [*body, record]), Await("q", into="out"), record],
    )
    state = QState()
    execute(wf, Context(state=state))
    # iteration 0 has one in flight (nothing awaited); iterations 1, 2 resolve 0, 1; the drain resolves 2
    assert seen == [None, 0, 1, 2]
    assert state.q == []
