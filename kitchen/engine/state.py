"""Workflow state: one pydantic model per workflow. Data fields are validated on assignment;
handles (clients, tokenizers) and pending futures are excluded from serialisation.
"""

from __future__ import annotations

from typing import Annotated, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from kitchen.engine.futures import APIFuture

T = TypeVar("T")


class _Marker:
    def __init__(self, kind: str) -> None:
        self.kind = kind

    def __repr__(self) -> str:
        return self.kind


QUEUE = _Marker("queue")
HANDLE = _Marker("handle")

# Futures in submission order: a stage appends, `Await(field)` resolves them all, and
# `Await(field, keep=1)` all but the newest (pipelining). validate() checks the queue is drained
# (keep=0) on every path, so a forgotten future is a build error, not a silent no-op.
PendingQueue = Annotated[list[APIFuture[T]], QUEUE, Field(default_factory=list, exclude=True)]
# A live object (client, tokenizer, renderer): not data, never serialised.
Handle = Annotated[T | None, HANDLE, Field(default=None, exclude=True)]


class BaseState(BaseModel):
    """Fields every workflow state has. Subclass per workflow."""

    model_config = ConfigDict(
        arbitrary_types_allowed=True, validate_assignment=True, extra="forbid"
    )

    step: int = Field(0, description="Training steps completed; owned by the runner.")


def field_kind(state_cls: type[BaseState], name: str) -> str:
    """'queue', 'handle' or 'data'."""
    info = state_cls.model_fields[name]
    for meta in info.metadata:
        if meta is QUEUE:
            return "queue"
        if meta is HANDLE:
            return "handle"
    return "data"


def available_at_start(state_cls: type[BaseState]) -> set[str]:
    """Fields whose declared default is a real value: readable before any stage writes them."""
    out = set()
    for name, info in state_cls.model_fields.items():
        if field_kind(state_cls, name) != "data":
            continue
        if info.default_factory is not None or (
            info.default is not None and not info.is_required()
        ):
            out.add(name)
    return out


def state_fields(state_cls: type[BaseState]) -> set[str]:
    return set(state_cls.model_fields)
