from contextlib import contextmanager

from kitchen.engine import telemetry
from kitchen.engine.graph import Loop, Workflow
from kitchen.engine.runner import execute
from kitchen.engine.stage import Context

from .states import Add, Load, ToyState


class RecordingTracer:
    def __init__(self):
        self.spans = []

    @contextmanager
    def start_as_current_span(self, name, attributes=None):
        self.spans.append((name, dict(attributes or {})))
        yield None


def test_spans_cover_workflow_loops_and_stages_when_a_provider_is_installed(monkeypatch):
    tracer = RecordingTracer()
    monkeypatch.setattr(telemetry, "_tracer", tracer)
    monkeypatch.setattr(telemetry, "enabled", lambda: True)
    wf = Workflow("toy", ToyState, [Load(n=2), Loop("batch", "n_items", "batch_idx", [Add()])])
    execute(wf, Context(state=ToyState()))
    names = [n for n, _ in tracer.spans]
    assert names == [
        "workflow toy",
        "stage load",
        "loop batch",
        "stage add",
        "loop batch",
        "stage add",
    ]
    assert tracer.spans[3][1]["kitchen.path"] == "batch[0]/add"


def test_no_spans_without_a_provider(monkeypatch):
    tracer = RecordingTracer()
    monkeypatch.setattr(telemetry, "_tracer", tracer)
    execute(Workflow("toy", ToyState, [Load(n=2)]), Context(state=ToyState()))
    assert tracer.spans == []
