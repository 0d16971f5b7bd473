"""OpenTelemetry API spans around workflow / loop / stage, and a stage-duration histogram.

Without an SDK tracer provider installed, spans are skipped entirely (the API's no-op spans still
cost ~15 us each, most of the runner's budget); install one (`trace.set_tracer_provider`) and every
workflow, loop iteration and stage gets a span.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

from opentelemetry import metrics, trace

_tracer = trace.get_tracer("kitchen")
_meter = metrics.get_meter("kitchen")
stage_duration = _meter.create_histogram(
    "kitchen.stage.duration", unit="s", description="Wall time of one stage call"
)
_NO_SPAN: AbstractContextManager[Any] = nullcontext()


def enabled() -> bool:
    return not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)


def span(kind: str, name: str, **attributes: Any) -> AbstractContextManager[Any]:
    if not enabled():
        return _NO_SPAN
    return _span(kind, name, attributes)


@contextmanager
def _span(kind: str, name: str, attributes: dict[str, Any]) -> Iterator[Any]:
    full = {"kitchen.kind": kind, **attributes}
    with _tracer.start_as_current_span(f"{kind} {name}", attributes=full) as s:
        yield s


def record_stage(name: str, seconds: float) -> None:
    stage_duration.record(seconds, {"kitchen.stage": name})
