"""The model name `policy`: the current weights, swapped after each optim step, each call holding
the snapshot it samples on until it is done.

A snapshot is held by the slot while it is current and by each call that leased it. Once it is
neither, the slot drops its last reference: the sampler (and its weights, e.g. a LoRA snapshot's
tensors) is then freed as any Python object, unless the caller keeps it. So over a long run the
live snapshots are the current one and those an in-flight call still samples on.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from kitchen.serve.errors import UserError
from kitchen.serve.openai.models import ChatFormat, ServedModel


@dataclass
class _Snapshot:
    model: ServedModel
    holders: int = 0


class PolicySlot:
    """The current policy snapshot and the older ones still leased. Thread-safe."""

    def __init__(self, name: str, renderer: Any = None, context: int | None = None) -> None:
        self.name = name
        self._renderer = renderer
        self._context = context
        self._lock = threading.Lock()
        self._current: _Snapshot | None = None
        self._leased: dict[int, _Snapshot] = {}  # id -> an older snapshot some call still holds
        self._format: ChatFormat | None = None

    def set(self, sampler: Any, version: int, base_model: str | None = None) -> None:
        """From now on the name samples with `sampler` (policy version `version`)."""
        base = base_model or _base_model(sampler)
        with self._lock:
            if self._format is None or self._format.base_model != base:
                self._format = ChatFormat(base, sampler.get_tokenizer(), self._renderer)
            model = ServedModel(
                self.name,
                sampler,
                base,
                chat_format=self._format,
                version=version,
                context=self._context,
            )
            old, self._current = self._current, _Snapshot(model)
            if old is not None and old.holders:
                self._leased[id(old)] = old

    def lease(self) -> tuple[ServedModel, Any]:
        """The current snapshot for one call, and the token to `release` it with."""
        with self._lock:
            snapshot = self._current
            if snapshot is None:
                raise UserError(
                    f"model {self.name!r} has no weights yet: no training run set a policy"
                )
            snapshot.holders += 1
            return snapshot.model, snapshot

    def release(self, token: Any) -> None:
        with self._lock:
            token.holders -= 1
            if token.holders == 0 and token is not self._current:
                self._leased.pop(id(token), None)

    def live(self) -> int:
        """Snapshots held now: the current one and those in-flight calls sample on."""
        with self._lock:
            return len(self._leased) + (self._current is not None)

    @property
    def version(self) -> int | None:
        with self._lock:
            return None if self._current is None else self._current.model.version


def _base_model(sampler: Any) -> str:
    get = getattr(sampler, "get_base_model", None)
    if get is None:
        raise UserError("set_policy: the sampling client tells no base model; pass base_model")
    return str(get())
