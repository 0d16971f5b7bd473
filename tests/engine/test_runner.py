import asyncio

import pytest

from kitchen.engine.errors import StageError
from kitchen.engine.graph import Await, Every, Loop, When, Workflow
from kitchen.engine.runner import BaseHook, Runner, execute
from kitchen.engine.stage import Context, Resume, stage

from .states import Add, Boom, Load, Mark, Submit, ToyState


class Recorder(BaseHook):
    def __init__(self):
        self.steps = []
        self.stages = []

    def on_step_end(self, step, metrics):
        self.steps.append((step, dict(metrics)))

    def on_stage_end(self, path, name, seconds, metrics):
        self.stages.append(path)


def run(wf, **kw):
    rec = Recorder()
    result = execute(wf, Context(state=ToyState()), hooks=[rec], **kw)
    return result, rec


def test_runs_in_order_with_loops_and_paths():
    wf = Workflow(
        "toy",
        ToyState,
        [
            Load(n=3),
            Loop(
                "epoch",
                2,
                "epoch_idx",
                [Loop("batch", "n_items", "batch_idx", [Add()], steps=True)],
            ),
        ],
    )
    result, rec = run(wf)
    assert result.state.trace == ["add0", "add1", "add2"] * 2
    assert result.state.total == 6
    assert result.steps == 6
    assert rec.stages[1] == "epoch[0]/batch[0]/add"
    assert rec.stages[-1] == "epoch[1]/batch[2]/add"
    assert [s for s, _ in rec.steps] == [0, 1, 2, 3, 4, 5]
    assert rec.steps[2][1]["total"] == 3 and "time/total" in rec.steps[2][1]


def test_when_runs_on_schedule():
    wf = Workflow(
        "toy",
        ToyState,
        [Loop("batch", 5, "batch_idx", [When(Every(2), [Mark("even")], orelse=[Mark("odd")])])],
    )
    result, _ = run(wf)
    assert result.state.trace == ["odd", "even", "odd", "even", "odd"]


def test_finally_runs_after_an_error_and_the_error_surfaces():
    wf = Workflow("toy", ToyState, [Mark("a"), Boom(), Mark("never")], finally_=[Mark("cleanup")])
    state = ToyState()
    with pytest.raises(StageError, match="boom: ValueError: boom"):
        execute(wf, Context(state=state))
    assert state.trace == ["a", "cleanup"]


def test_finally_runs_after_keyboard_interrupt():
    @stage()
    def interrupt(ctx):
        raise KeyboardInterrupt

    wf = Workflow("toy", ToyState, [interrupt], finally_=[Mark("cleanup")])
    state = ToyState()
    with pytest.raises(KeyboardInterrupt):
        execute(wf, Context(state=state))
    assert state.trace == ["cleanup"]


def test_write_guard_rejects_undeclared_write():
    @stage(reads={"items"})
    def sneaky(ctx):
        ctx.state.total = 5

    wf = Workflow("toy", ToyState, [Load(), sneaky])
    with pytest.raises(
        StageError, match="stage sneaky wrote 'total', which it does not declare in writes"
    ):
        execute(wf, Context(state=ToyState()))


def test_read_guard_rejects_undeclared_read():
    @stage()
    def peek(ctx):
        return {"n": len(ctx.state.items)}

    wf = Workflow("toy", ToyState, [Load(), peek])
    with pytest.raises(StageError, match="read 'items'"):
        execute(wf, Context(state=ToyState()))


def test_await_resolves_futures_and_clears_them():
    wf = Workflow(
        "toy",
        ToyState,
        [
            Loop("batch", 3, "batch_idx", [Await("fut", into="fut_result"), Submit()]),
            Await("fut", into="fut_result"),
        ],
    )
    result, _ = run(wf)
    assert result.state.fut == [] and result.state.fut_result == 20


def test_max_steps_stops_the_step_loop_then_runs_what_follows():
    wf = Workflow(
        "toy",
        ToyState,
        [Load(n=5), Loop("batch", "n_items", "batch_idx", [Add()], steps=True), Mark("after")],
    )
    result, _ = run(wf, max_steps=2)
    assert result.state.trace == ["add0", "add1", "after"]


def test_resume_cursor_continues_without_replay_or_skip():
    captured = {}

    @stage(reads={"batch_idx", "epoch_idx"})
    def checkpoint(ctx):
        captured.setdefault("cursors", []).append(ctx.next_cursor())

    body = [Loop("batch", "n_items", "batch_idx", [Add(), checkpoint], steps=True)]
    wf = Workflow("toy", ToyState, [Load(n=3), Loop("epoch", 2, "epoch_idx", body)])
    run(wf)
    cursors = captured["cursors"]
    assert cursors[0] == {"epoch": 0, "batch": 1}
    assert cursors[2] == {"epoch": 1}  # last batch of epoch 0 carries into the next epoch
    assert cursors[-1] == {"epoch": 2}
    # resume after step 4 (epoch 1, batch 1): continue at exactly that batch
    state = ToyState()
    ctx = Context(state=state, resume=Resume(cursor=cursors[3], step=4, state_path=None))
    result = asyncio.run(Runner(wf, ctx).run())
    assert state.trace == ["add1", "add2"]
    assert result.steps == 6


def test_async_stages_run():
    @stage(reads={"trace"}, writes={"trace"})
    async def later(ctx):
        await asyncio.sleep(0)
        ctx.state.trace = [*ctx.state.trace, "async"]

    result, _ = run(Workflow("toy", ToyState, [later]))
    assert result.state.trace == ["async"]


def test_cursor_after_loops_points_past_the_end_or_at_the_first_step_not_run():
    seen = {}

    @stage()
    def after(ctx):
        seen["cursor"] = ctx.next_cursor()

    body = [Loop("batch", 3, "batch_idx", [Mark("x")], steps=True)]
    wf = Workflow("toy", ToyState, [Loop("epoch", 2, "epoch_idx", body), after])
    run(wf)
    assert seen["cursor"] == {"epoch": 2}
    run(wf, max_steps=4)
    assert seen["cursor"] == {"epoch": 1, "batch": 1}
