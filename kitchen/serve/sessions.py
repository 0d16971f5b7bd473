"""Who owns what on the server: sessions, their training models and their samplers.

A session ends when its client finishes it (ServiceClient.close) or stops heartbeating; its
models and samplers go with it. Thread-safe: one lock around three dicts.
"""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, TypeVar

from kitchen.serve.errors import Gone, NotFound, UserError
from kitchen.serve.requests import ModelLane
from kitchen.serve.sampling import SamplerEntry

T = TypeVar("T")
Meta = dict[str, Any] | None  # user metadata as requests carry it


@dataclass
class Session:
    session_id: str
    last_seen: float = field(default_factory=time.monotonic)
    finished: bool = False
    models: set[str] = field(default_factory=set)
    samplers: set[str] = field(default_factory=set)
    user_metadata: dict[str, str] | None = None
    display_name: str | None = None


@dataclass
class RunRecord:
    """What the server tells about a training run (a model), kept after its session ends."""

    model_id: str
    session_id: str
    base_model: str
    lora_rank: int | None  # None: full fine-tuning
    user_metadata: dict[str, str] | None
    last_request: float = field(default_factory=time.time)  # wall clock: the SDK shows it


@dataclass
class ModelEntry:
    """A training model: the engine client, and the lane its requests run through in order."""

    model_id: str
    session_id: str
    client: Any  # LocalTrainingClient
    lane: ModelLane
    run: RunRecord
    # seq_id -> request id: an SDK retry of a request (its response was lost) gets the same one.
    by_seq_id: dict[int, str] = field(default_factory=dict)


class SessionTable:
    """The server's live sessions and the training models and samplers each one opened, by id."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sessions: dict[str, Session] = {}
        self._models: dict[str, ModelEntry] = {}
        self._samplers: dict[str, SamplerEntry] = {}
        self._runs: dict[str, RunRecord] = {}  # every model created, live or not

    def new_session(self, user_metadata: Meta = None, display_name: str | None = None) -> Session:
        session = Session(
            f"kitchen-{uuid.uuid4().hex[:12]}",
            user_metadata=_as_strings(user_metadata),
            display_name=display_name,
        )
        with self._lock:
            self._sessions[session.session_id] = session
        return session

    def session(self, session_id: str) -> Session:
        """A live session; 404 if unknown, 410 (the SDK's cue to stop heartbeating) if finished."""
        with self._lock:
            session = self._sessions.get(session_id)
        if session is None:
            raise NotFound(f"session {session_id!r} is unknown to this server")
        if session.finished:
            raise Gone(f"session {session_id} has finished")
        return session

    def finish(self, session_id: str) -> list[ModelEntry]:
        """Mark the session finished; its models (for the caller to close) leave the table."""
        with self._lock:
            session = self._sessions.get(session_id)
            if session is None:
                raise NotFound(f"session {session_id!r} is unknown to this server")
            if session.finished:
                return []
            session.finished = True
            entries = [self._models.pop(m) for m in session.models if m in self._models]
            for sampler_id in session.samplers:
                self._samplers.pop(sampler_id, None)
        return entries

    def idle_sessions(self, timeout_s: float) -> list[str]:
        cutoff = time.monotonic() - timeout_s
        with self._lock:
            return [
                s.session_id
                for s in self._sessions.values()
                if not s.finished and s.last_seen < cutoff
            ]

    def open_sessions(self) -> list[str]:
        with self._lock:
            return [s.session_id for s in self._sessions.values() if not s.finished]

    def all_sessions(self) -> list[Session]:
        """Every session this process opened, finished ones too, oldest first."""
        with self._lock:
            return list(self._sessions.values())

    def known_session(self, session_id: str) -> Session:
        """A session, live or finished; 404 if this process never opened it."""
        return self._find(self._sessions, session_id, "session")

    def runs(self) -> list[RunRecord]:
        """Every training run this process created, live or not, oldest first."""
        with self._lock:
            return list(self._runs.values())

    def new_model_id(self, session: Session, model_seq_id: int) -> str:
        model_id = f"{session.session_id}:train:{model_seq_id}"  # the id the SDK derives itself
        with self._lock:
            if model_id in self._models:
                raise UserError(f"model_seq_id {model_seq_id} was already used in this session")
        return model_id

    def add_model(
        self, model_id: str, session: Session, client: Any, metadata: Meta = None
    ) -> None:
        """Register a created model; refused (the caller closes it) if the session ended since."""
        info = client.get_info()
        run = RunRecord(
            model_id,
            session.session_id,
            info.model_data.model_name,
            info.lora_rank if info.is_lora else None,
            _as_strings(metadata),
        )
        with self._lock:
            if session.finished:
                raise Gone(f"session {session.session_id} finished while {model_id} was created")
            self._models[model_id] = ModelEntry(
                model_id, session.session_id, client, ModelLane(model_id), run
            )
            self._runs[model_id] = run
            session.models.add(model_id)

    def model(self, model_id: str) -> ModelEntry:
        return self._find(self._models, model_id, "model")

    def add_sampler(self, session: Session, sampler_id: str, entry: SamplerEntry) -> None:
        entry.session_id = session.session_id
        with self._lock:
            self._samplers[sampler_id] = entry
            session.samplers.add(sampler_id)

    def sampler(self, sampler_id: str) -> SamplerEntry:
        return self._find(self._samplers, sampler_id, "sampling session")

    def _find(self, table: dict[str, T], key: str, what: str) -> T:
        with self._lock:
            entry = table.get(key)
        if entry is None:
            raise NotFound(f"{what} {key!r} is unknown to this server (or its session ended)")
        return entry


def _as_strings(metadata: dict[str, Any] | None) -> dict[str, str] | None:
    """Metadata as the SDK's responses type it (str -> str); requests allow any JSON value."""
    return {k: str(v) for k, v in metadata.items()} if metadata else None
