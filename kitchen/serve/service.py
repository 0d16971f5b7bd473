"""The Tinker service over the local engine, without HTTP: sessions, models, samplers, requests.

Each method takes the SDK's own request type and returns the SDK's response type (or an
`UntypedAPIFuture` whose result is long-polled). Mistakes in a request raise `UserError` at once;
failures of accepted work come back through the request's future. FastAPI glue is in `app.py`.
"""

from __future__ import annotations

import itertools
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from tinker import types

from kitchen.adapters.local.backend import LocalBackend
from kitchen.serve import paths
from kitchen.serve.errors import Gone, UserError
from kitchen.serve.external_weights import check_recipients, export_folder
from kitchen.serve.requests import FWDBWD, MODEL, SAMPLE, RequestStore, chain
from kitchen.serve.sampling import (
    SamplerEntry,
    check_provenance_session,
    check_sample_request,
    submit_sample,
)
from kitchen.serve.sessions import Meta, ModelEntry, Session, SessionTable
from kitchen.serve.settings import ServeSettings
from kitchen.serve.wire import ForwardBackwardCall


def _run_into(job: Callable[[], Any], target: Future[Any]) -> None:
    try:
        chain(job(), target)
    except BaseException as e:
        target.set_exception(e)


class KitchenService:
    """State of one `kitchen serve` process. Thread-safe: FastAPI calls it from its event loop
    and from its thread pool; the engine completes futures from its own threads."""

    def __init__(self, settings: ServeSettings, backend: Any | None = None) -> None:
        self.settings = settings
        self.requests = RequestStore()
        self._backend = backend
        self.sessions = SessionTable()
        self._backend_lock = threading.Lock()
        # Model loads and session teardown: off the event loop, never behind training work.
        self._control = ThreadPoolExecutor(max_workers=2, thread_name_prefix="serve-control")
        self._policy_listeners: list[Callable[[Any, int, str], None]] = []
        self._policy_versions = itertools.count(1)

    # -- the gateway's `policy` -------------------------------------------------------------------

    def on_policy(self, listener: Callable[[Any, int, str], None]) -> None:
        """Call `listener(sampler, version, base_model)` with each sampler a training session opens
        on its own weights (a snapshot, or a sampler checkpoint of this server opened): the newest
        is what the OpenAI routes' `policy` samples with. Versions count them from 1."""
        self._policy_listeners.append(listener)

    def _new_policy(self, entry: SamplerEntry) -> None:
        version = next(self._policy_versions)
        for listener in self._policy_listeners:
            listener(entry.sampler, version, entry.base_model)

    # -- engine -----------------------------------------------------------------------------------

    @property
    def backend(self) -> Any:
        with self._backend_lock:
            if self._backend is None:
                from kitchen.adapters.local import create_local_backend
                from kitchen.adapters.samplers import remote_samplers
                from kitchen.ports import BackendSettings

                s = self.settings
                extra: dict[str, Any] = {"num_threads": s.threads} if s.threads else {}
                extra |= {"activation_checkpointing": s.activation_checkpointing}
                extra |= {"packing": s.packing}
                extra |= {"context_length": s.context_length, "rope_scaling": s.rope_scaling}
                extra |= {"sampler": s.sampler, "vllm_urls": s.vllm_urls}
                extra |= {"vllm_max_lora_rank": s.vllm_max_lora_rank}
                extra |= {"vllm_gpu_memory_utilization": s.vllm_gpu_memory_utilization}
                extra |= {"base_quantization": s.base_quantization}
                extra |= {"spread_sampling": s.spread_sampling}
                self._backend = create_local_backend(
                    BackendSettings(
                        log_dir=s.checkpoint_dir,
                        seed=s.seed,
                        device=s.device,
                        dtype=s.dtype,
                        extra=extra,
                    ),
                    remote_samplers(extra),
                )
            return self._backend

    @property
    def checkpoint_root(self) -> Path:
        return Path(self.backend.settings.checkpoint_root)

    def preload(self, base_model: str) -> None:
        host = self.backend.shared_host(base_model)
        if self.settings.sampler == "vllm":
            # vLLM loads for minutes: before the server answers, not in a client's first request.
            self.backend.remote().base(host)

    def loaded_models(self) -> list[tuple[str, int]]:
        if self._backend is None:
            return []
        return [(h.model_name, h.max_context) for h in self._backend.hosts()]

    # -- sessions ---------------------------------------------------------------------------------

    def create_session(self, request: types.CreateSessionRequest) -> types.CreateSessionResponse:
        session = self.sessions.new_session(request.user_metadata, request.display_name)
        return types.CreateSessionResponse(session_id=session.session_id)

    def heartbeat(self, session_id: str) -> types.SessionHeartbeatResponse:
        self.sessions.session(session_id).last_seen = time.monotonic()
        return types.SessionHeartbeatResponse()

    def finish_session(self, session_id: str, reason: str = "its session finished") -> None:
        """Finish the session: its unfinished requests are dropped (a finished or dead client
        collects no results), its models freed, its stability records forgotten."""
        for entry in self.sessions.finish(session_id):
            self._control.submit(_close_model, entry)
        self.requests.cancel_session(session_id, f"request dropped: {reason}")
        records = getattr(self._backend, "stability", None)  # the local engine's (stability.py)
        if records is not None:
            records.drop(f"{session_id}:")

    def reap_idle_sessions(self) -> list[str]:
        """Finish sessions whose client stopped heartbeating (it crashed or lost the network)."""
        idle = self.sessions.idle_sessions(self.settings.session_timeout_s)
        for session_id in idle:
            self.finish_session(session_id, "its client stopped heartbeating")
        return idle

    def cancel_request(self, request_id: str) -> None:
        """cancel_future: drop the request's work if it has not finished (unknown ids: nothing)."""
        record = self.requests.get(request_id)
        if record is not None:
            record.cancel("request cancelled by the client")

    def close(self) -> None:
        """Shut down within seconds: queued work is dropped, running steps finish."""
        self.requests.cancel_all("the server is shutting down")
        for session_id in self.sessions.open_sessions():
            self.finish_session(session_id, "the server is shutting down")
        self._control.shutdown(wait=True, cancel_futures=True)
        if isinstance(self._backend, LocalBackend):
            self._backend.close(cancel=True)
        elif self._backend is not None:  # a test double
            self._backend.close()

    # -- models -----------------------------------------------------------------------------------

    def _add_model(self, model_id: str, session: Session, client: Any, meta: Meta = None) -> None:
        try:
            self.sessions.add_model(model_id, session, client, meta)
        except Gone:
            self._control.submit(client.close)
            raise

    def create_model(self, request: types.CreateModelRequest) -> types.UntypedAPIFuture:
        session = self.sessions.session(request.session_id)
        if request.optimizer_config.type != "adamw":
            raise UserError(
                f"optimizer {request.optimizer_config.type!r}: the local engine has adamw only"
            )
        model_id = self.sessions.new_model_id(session, request.model_seq_id)
        lora = request.lora_config
        record = self.requests.new(MODEL, session.session_id)

        def create() -> types.CreateModelResponse:
            client = self.backend.create_lora_training_client(
                request.base_model,
                rank=lora.rank if lora else 0,  # no LoRA config: full fine-tuning
                seed=lora.seed if lora else None,
                train_mlp=lora.train_mlp if lora else True,
                train_attn=lora.train_attn if lora else True,
                train_unembed=lora.train_unembed if lora else True,
                # Tinker's LoraConfig has no vision switch: a client asks through its metadata.
                train_vision=(request.user_metadata or {}).get("train_vision") == "true",
            )
            self._add_model(model_id, session, client, request.user_metadata)
            return types.CreateModelResponse(model_id=model_id)

        self._control.submit(_run_into, create, record.future)
        return types.UntypedAPIFuture(request_id=record.request_id, model_id=model_id)

    def get_info(self, request: types.GetInfoRequest) -> types.GetInfoResponse:
        entry = self.sessions.model(request.model_id)
        info = entry.client.get_info()
        host = getattr(entry.client, "host", None)
        # The tokenizer files sit in the resolved model folder; the SDK loads them from there.
        tokenizer_id = str(host.model_path) if host is not None else info.model_data.tokenizer_id
        data = info.model_data.model_copy(update={"tokenizer_id": tokenizer_id})
        return info.model_copy(update={"model_id": entry.model_id, "model_data": data})

    def _submit(
        self,
        entry: ModelEntry,
        seq_id: int | None,
        kind: str,
        encoding: str,
        job: Callable[[], Any],
        blocking: bool = False,
    ) -> types.UntypedAPIFuture:
        if seq_id and seq_id in entry.by_seq_id:  # the SDK retried: answer with the first one
            return types.UntypedAPIFuture(
                request_id=entry.by_seq_id[seq_id], model_id=entry.model_id
            )
        entry.run.last_request = time.time()
        record = self.requests.new(encoding, entry.session_id)
        if seq_id:
            entry.by_seq_id[seq_id] = record.request_id
        entry.lane.submit(seq_id or None, kind, job, record.future, blocking)
        return types.UntypedAPIFuture(request_id=record.request_id, model_id=entry.model_id)

    # Once a request names a live model, every mistake in it fails its future (category user)
    # rather than the HTTP call: the model's seq_id order then moves on past it, as the SDK does.

    def forward_backward(self, call: ForwardBackwardCall) -> types.UntypedAPIFuture:
        entry = self.sessions.model(call.model_id)

        def job() -> Any:
            if call.loss_fn == "custom":
                raise UserError("server-side custom losses are not supported; the SDK runs them")
            if not call.data:
                raise UserError("forward_backward: no data")
            if call.loss_fn == "stable_reinforce":
                check_provenance_session(call.data, entry.session_id)
            method = entry.client.forward if call.forward_only else entry.client.forward_backward
            return method(call.data, call.loss_fn, call.loss_fn_config)

        kind = "forward" if call.forward_only else "forward_backward"
        return self._submit(entry, call.seq_id, kind, FWDBWD, job)

    def optim_step(self, request: types.OptimStepRequest) -> types.UntypedAPIFuture:
        entry = self.sessions.model(request.model_id)
        params = request.optim_params

        def job() -> Any:
            if not isinstance(params, types.AdamParams):
                raise UserError(
                    f"optimizer {type(params).__name__}: the local engine has Adam only"
                )
            return entry.client.optim_step(params)

        return self._submit(entry, request.seq_id, "optim_step", MODEL, job)

    def save_weights(self, request: types.SaveWeightsRequest) -> types.UntypedAPIFuture:
        entry = self.sessions.model(request.model_id)

        def job() -> Any:
            name = request.path or f"state-{request.seq_id}"
            ref = paths.checkpoint_ref(entry.model_id, "state", name)
            if not request.overwrite and ref.folder(self.checkpoint_root).exists():
                raise UserError(f"checkpoint {ref.tinker_path} exists; pass overwrite=True")
            response = types.SaveWeightsResponse(path=ref.tinker_path, type="save_weights")
            return entry.client.save_state(ref.engine_name).map(lambda _: response)

        return self._submit(entry, request.seq_id, "save_weights", MODEL, job)

    def save_weights_for_sampler(
        self, request: types.SaveWeightsForSamplerRequest
    ) -> types.UntypedAPIFuture:
        entry = self.sessions.model(request.model_id)
        if request.path:

            def save() -> Any:
                ref = paths.checkpoint_ref(entry.model_id, "sampler", request.path or "")
                response = types.SaveWeightsForSamplerResponseInternal(path=ref.tinker_path)
                return entry.client.save_weights_for_sampler(ref.engine_name).map(
                    lambda _: response
                )

            return self._submit(entry, request.seq_id, "save_weights_for_sampler", MODEL, save)

        def snapshot() -> types.SaveWeightsForSamplerResponseInternal:
            if request.sampling_session_seq_id is None:
                raise UserError(
                    "save_weights_for_sampler needs a path or a sampling_session_seq_id"
                )
            session = self.sessions.session(entry.session_id)
            sampler_id = f"{session.session_id}:sample:{request.sampling_session_seq_id}"
            # Blocks the lane until every earlier request ran: the snapshot has their updates.
            sampler = entry.client.save_weights_and_get_sampling_client()
            base_model = entry.client.get_info().model_data.model_name
            opened = SamplerEntry(sampler, base_model, None)
            self.sessions.add_sampler(session, sampler_id, opened)
            self._new_policy(opened)
            return types.SaveWeightsForSamplerResponseInternal(sampling_session_id=sampler_id)

        return self._submit(entry, request.seq_id, "snapshot", MODEL, snapshot, blocking=True)

    def save_weights_external(
        self, request: types.SaveWeightsExternalRequest
    ) -> types.UntypedAPIFuture:
        """A sampler save of the model, moved (and encrypted) into its export folder."""
        entry = self.sessions.model(request.model_id)
        ref = paths.checkpoint_ref(entry.model_id, "external", request.path)
        check_recipients(request.age_encryption_recipients)  # refused before weights are written
        staging = f"{ref.engine_name}.export-{uuid.uuid4().hex[:8]}"

        def finish(_: Any) -> types.SaveWeightsExternalResponseInternal:
            folder = self.checkpoint_root / paths.SUBDIRS["sampler"] / staging
            dest = ref.folder(self.checkpoint_root)
            size = export_folder(folder, dest, request.age_encryption_recipients)
            return types.SaveWeightsExternalResponseInternal(path=ref.tinker_path, size_bytes=size)

        def save() -> Any:
            return entry.client.save_weights_for_sampler(staging).map(finish)

        return self._submit(entry, request.seq_id, "save_weights_external", MODEL, save)

    def load_weights(self, request: types.LoadWeightsRequest) -> types.UntypedAPIFuture:
        """Both addressing modes: onto an existing model (model_id + seq_id), or a new model
        created from the checkpoint (session_id + model_seq_id)."""
        if request.model_id is not None:
            entry = self.sessions.model(request.model_id)

            def load() -> Any:
                folder, shown = paths.resolve_checkpoint(
                    request.path, self.checkpoint_root, self.settings.allowed_checkpoint_dirs
                )
                client = entry.client
                method = (
                    client.load_state_with_optimizer if request.optimizer else client.load_state
                )
                response = types.LoadWeightsResponse(path=shown, model_id=entry.model_id)
                return method(folder).map(lambda _: response)

            return self._submit(entry, request.seq_id, "load_weights", MODEL, load)
        folder, response_path = paths.resolve_checkpoint(
            request.path, self.checkpoint_root, self.settings.allowed_checkpoint_dirs
        )
        if request.session_id is None or request.model_seq_id is None:
            raise UserError("load_weights needs model_id, or session_id and model_seq_id")
        session = self.sessions.session(request.session_id)
        model_id = self.sessions.new_model_id(session, request.model_seq_id)
        record = self.requests.new(MODEL, session.session_id)

        def create() -> types.LoadWeightsResponse:
            make = (
                self.backend.create_training_client_from_state_with_optimizer
                if request.optimizer
                else self.backend.create_training_client_from_state
            )
            self._add_model(model_id, session, make(folder))
            return types.LoadWeightsResponse(path=response_path, model_id=model_id)

        self._control.submit(_run_into, create, record.future)
        return types.UntypedAPIFuture(request_id=record.request_id, model_id=model_id)

    def weights_info(self, tinker_path: str) -> types.WeightsInfoResponse:
        from kitchen.adapters.local.clients import checkpoints as ckpt

        folder, _ = paths.resolve_checkpoint(
            tinker_path, self.checkpoint_root, self.settings.allowed_checkpoint_dirs
        )
        meta = ckpt.read_meta(Path(folder))
        lora = meta.lora or {}
        return types.WeightsInfoResponse(
            base_model=meta.base_model,
            is_lora=meta.lora is not None,
            lora_rank=lora.get("rank"),
            train_mlp=lora.get("train_mlp"),
            train_attn=lora.get("train_attn"),
            train_unembed=lora.get("train_unembed"),
        )

    # -- sampling ---------------------------------------------------------------------------------

    def create_sampling_session(
        self, request: types.CreateSamplingSessionRequest
    ) -> types.CreateSamplingSessionResponse:
        """Blocking (it may load a model): FastAPI runs it in its thread pool."""
        session = self.sessions.session(request.session_id)
        sampler_id = f"{session.session_id}:sample:{request.sampling_session_seq_id}"
        opened = self._open_sampler(request.model_path, request.base_model)
        self.sessions.add_sampler(session, sampler_id, opened)
        if request.model_path and request.model_path.startswith("tinker://"):
            self._new_policy(opened)  # a sampler checkpoint a training session of this server saved
        return types.CreateSamplingSessionResponse(sampling_session_id=sampler_id)

    def open_sampler(self, model_path: str | None, base_model: str | None) -> SamplerEntry:
        """A sampler on a checkpoint path (tinker:// or a local folder) or a base model."""
        return self._open_sampler(model_path, base_model)

    def _open_sampler(self, model_path: str | None, base_model: str | None) -> SamplerEntry:
        if model_path:
            folder, shown = paths.resolve_checkpoint(
                model_path, self.checkpoint_root, self.settings.allowed_checkpoint_dirs
            )
            sampler = self.backend.create_sampling_client(model_path=folder)
            return SamplerEntry(sampler, sampler.get_base_model(), shown)
        if not base_model:
            raise UserError("a sampling session needs model_path or base_model")
        return SamplerEntry(
            self.backend.create_sampling_client(base_model=base_model), base_model, None
        )

    def get_sampler(self, sampler_id: str) -> types.GetSamplerResponse:
        entry = self.sessions.sampler(sampler_id)
        return types.GetSamplerResponse(
            sampler_id=sampler_id, base_model=entry.base_model, model_path=entry.model_path
        )

    def asample(self, request: types.SampleRequest) -> types.UntypedAPIFuture:
        check_sample_request(request)
        if request.sampling_session_id is not None:
            sampler_id = request.sampling_session_id
            entry = self.sessions.sampler(sampler_id)
        else:  # stateless form: sample straight from a path or a base model
            entry = self._open_sampler(request.model_path, request.base_model)
            sampler_id = f"adhoc-{uuid.uuid4().hex[:8]}"
        record = self.requests.new(SAMPLE, entry.session_id)
        seq = request.seq_id if request.seq_id is not None else record.request_id
        # Named now: the SDK stamps these ids on the sequences; stability records use them too.
        ids = [f"{sampler_id}:{seq}:{i}" for i in range(request.num_samples)]
        chain(submit_sample(entry.sampler, request, ids, record), record.future)
        return types.UntypedAPIFuture(request_id=record.request_id, sample_sequence_ids=ids)

    # -- stats ------------------------------------------------------------------------------------

    def lane_events(self, model_id: str) -> list[Any]:
        return list(self.sessions.model(model_id).lane.events)


def _close_model(entry: ModelEntry) -> None:
    try:
        entry.client.close(cancel_queued=True)  # the running step finishes; queued ones go
    finally:
        entry.lane.close()
