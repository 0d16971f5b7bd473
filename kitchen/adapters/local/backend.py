"""LocalBackend: the embedded training engine behind kitchen.ports.TrainingBackend.

One backend keeps one in-memory copy of each base model (a `ModelHost`); every LoRA training client,
sampler snapshot and base-model sampler on that base shares it. Full fine-tuning (no LoRA) loads a
private copy instead, since its base weights change. With `--base-quantization nf4` the shared
copies are 4-bit (quantization.py); full fine-tuning is refused then, having no fp32 base to train.
"""

from __future__ import annotations

import copy
import threading
from pathlib import Path
from typing import Any

from kitchen.adapters.local.clients import checkpoints as ckpt
from kitchen.adapters.local.clients.executor import SOLO, Executor
from kitchen.adapters.local.clients.sampling_client import LocalSamplingClient, model_eos_ids
from kitchen.adapters.local.clients.training_client import LocalTrainingClient, next_model_id
from kitchen.adapters.local.distributed.commands import (
    LoadBase,
    LoadSnapshot,
    OpenBackend,
    OpenClient,
)
from kitchen.adapters.local.distributed.ranked_executor import ranked_executor
from kitchen.adapters.local.model.host import LoraSnapshot, ModelHost, load_host
from kitchen.adapters.local.model.locate import resolve_model
from kitchen.adapters.local.model.lora import LoraSpec
from kitchen.adapters.local.model.quantization import (
    allow_bitsandbytes,
    check_device,
    hold_back_bitsandbytes,
)
from kitchen.adapters.local.model.settings import (
    EngineSettings,
    apply_num_threads,
    choose_num_threads,
)
from kitchen.adapters.local.remote_samplers import RemoteSamplers, RemoteSamplersFactory
from kitchen.adapters.local.sample.compute_thread import ComputeThread
from kitchen.adapters.local.train.stability import StabilityRecords
from kitchen.engine.errors import BackendError, ConfigError
from kitchen.ports import BackendSettings, LoraRequest, TrainingBackend


class LocalBackend(TrainingBackend):
    """A ServiceClient-shaped factory of local training and sampling clients."""

    name = "local"

    def __init__(
        self,
        settings: BackendSettings | None = None,
        remote_samplers: RemoteSamplersFactory | None = None,
    ) -> None:
        """`remote_samplers`: who samples instead of the engine (`--sampler vllm`), picked by name
        in kitchen/adapters/samplers.py; None: the engine's own sampler."""
        self.backend_settings = settings or BackendSettings()
        self.settings = EngineSettings.from_backend_settings(self.backend_settings)
        # What --sampler names, for messages: the engine's own unless another was handed over.
        self.sampler = (
            "local"
            if remote_samplers is None
            else str(self.backend_settings.extra.get("sampler") or "vllm")
        )
        self._remote_factory = remote_samplers
        # Where calls compute: this process, or every rank of a --nproc N run (executor.py).
        self.ranks: Executor = executor()
        if self.settings.base_quantization == "none":
            hold_back_bitsandbytes()
        else:
            allow_bitsandbytes()
            self._check_quantization()
        self._largest_model = 0
        self._hosts: dict[str, ModelHost] = {}
        self._lock = threading.Lock()
        # The one compute thread: every sampler's requests decode together in its running batch, and
        # training calls, model loads and checkpoint writes run on it between decode steps.
        self.compute = ComputeThread()
        # What samplers recorded for stable_reinforce, by sequence id (stability.py).
        self.stability = StabilityRecords()
        self._clients: list[LocalTrainingClient] = []
        self._remote: RemoteSamplers | None = None  # made on first use
        self.ranks.tell(OpenBackend(self.backend_settings))

    def _check_quantization(self) -> None:
        """Refuse, before any work, what a 4-bit base cannot run with."""
        quantization = self.settings.base_quantization
        if self.ranks.size > 1:
            raise ConfigError(
                f"--base-quantization {quantization} does not run with --nproc > 1 yet "
                "(FSDP cannot shard 4-bit weights here); use --nproc 1"
            )
        if self.sampler != "local":
            raise ConfigError(
                f"--base-quantization {quantization} needs --sampler local: {self.sampler} would "
                "sample from its own full-precision base, not the 4-bit one that trains"
            )
        check_device(self.settings.device)

    @property
    def dtype_name(self) -> str:
        """The compute dtype in use ("float32" or "bfloat16"), "auto" resolved: what a run reports."""
        return self.settings.dtype_name

    def lora_training_client(self, request: LoraRequest) -> LocalTrainingClient:
        """create_lora_training_client: a LoRA adapter of r = `rank` (the SDK's name) on the
        selected modules; `rank` 0 asks for full fine-tuning of every weight (`lora` None from
        here on). `user_metadata` is accepted for SDK compatibility and not used."""
        rank, base_model = request.rank, request.base_model
        if rank < 0:
            raise ConfigError(
                f"LoRA rank is {rank}; expected a positive rank, or 0 for full fine-tuning"
            )
        seed = self.settings.seed if request.seed is None else request.seed
        if self._remote_factory is not None:
            self.remote().check_trainable(rank, resolve_model(base_model))
        lora = None
        if rank > 0:
            lora = LoraSpec(
                rank=rank,
                train_attn=request.train_attn,
                train_mlp=request.train_mlp,
                train_unembed=request.train_unembed,
                train_vision=request.train_vision,
            )
        # On the compute thread: loading and wrapping a model run torch ops (see compute_thread.py).
        client = self.compute.run(lambda: self._training_client(base_model, lora, seed))
        self._clients.append(client)
        if self._remote_factory is not None:  # vLLM loads while the recipe prepares its first batch
            self.remote().start(client.host, max_lora_rank=rank)
        return client

    def _training_client(
        self, base_model: str, lora: LoraSpec | None, seed: int
    ) -> LocalTrainingClient:
        if lora is None and self.settings.base_quantization != "none":
            raise ConfigError(
                f"full fine-tuning (LoRA rank 0) cannot train a 4-bit base "
                f"(--base-quantization {self.settings.base_quantization}): its weights are frozen; "
                "use a LoRA rank or --base-quantization none"
            )
        model_id = next_model_id()
        if lora is None:
            # The other ranks shard their copy with this one (a collective): they hear of it first.
            self.ranks.tell(OpenClient(model_id, base_model, lora, seed))
            return LocalTrainingClient(self, self.trained_host(base_model), lora, seed, model_id)
        client = LocalTrainingClient(self, self.shared_host(base_model), lora, seed, model_id)
        self.ranks.tell(OpenClient(model_id, base_model, lora, seed))
        return client

    def open_rank_client(
        self, base_model: str, lora: LoraSpec | None, seed: int, model_id: str
    ) -> LocalTrainingClient:
        """A rank > 0's part of rank 0's client `model_id` (distributed/worker.py)."""
        if lora is None:  # full fine-tuning: a copy of its own, sharded
            host = self.trained_host(base_model)
        else:
            host = self.load_shared(base_model, self.settings.base_quantization)
        return LocalTrainingClient(self, host, lora, seed, model_id)

    def load_snapshot(self, folder: Path, host: ModelHost, snapshot_id: int) -> LoraSnapshot:
        """A rank > 0's copy of the adapter rank 0 loaded from `folder` (distributed/worker.py)."""
        return snapshot_from(folder, host, snapshot_id)

    def trained_host(self, base_model: str) -> ModelHost:
        """A private copy of `base_model` to fine-tune fully (its weights change); sharded over
        the ranks of a --nproc N run (every rank, sharded_model.py)."""
        host = self._load(base_model)
        self.ranks.hold_trained(host)
        return host

    def create_training_client_from_state(self, path: str) -> LocalTrainingClient:
        """A client rebuilt from a save_state folder: same model and LoRA, its weights, fresh optimizer."""
        return self._from_state(path, with_optimizer=False)

    def create_training_client_from_state_with_optimizer(self, path: str) -> LocalTrainingClient:
        """As create_training_client_from_state, with the optimizer state too (exact resume)."""
        return self._from_state(path, with_optimizer=True)

    def create_sampling_client(
        self, model_path: str | None = None, base_model: str | None = None
    ) -> LocalSamplingClient:
        """A sampler on saved weights (`model_path`), or on the base model, adapters disabled."""
        if model_path is not None:
            return self.compute.run(lambda: self._sampler_from_path(model_path))
        if base_model is None:
            raise ConfigError("create_sampling_client needs model_path or base_model")
        return self.sampling_client_for(self.shared_host(base_model), None)

    def close(self, cancel: bool = False) -> None:
        """Free every client; queued work finishes first, or (`cancel`) is dropped."""
        for client in self._clients:
            client.close(cancel_queued=cancel)
        self._clients.clear()
        self.compute.close(cancel=cancel)
        if self._remote is not None:
            self._remote.close()

    def remote(self) -> RemoteSamplers:
        """The samplers of `--sampler vllm`, made from the factory this backend was given."""
        if self._remote is None:
            if self._remote_factory is None:
                raise BackendError(
                    f"--sampler {self.sampler}: this backend was built without its samplers; "
                    "build it with kitchen.adapters.samplers.remote_samplers(extra)"
                )
            self._remote = self._remote_factory(self)
        return self._remote

    # -- shared pieces, used by the clients -------------------------------------------------------

    def hosts(self) -> list[ModelHost]:
        """The models this backend holds in memory."""
        with self._lock:
            return list(self._hosts.values())

    def shared_host(self, base_model: str, quantization: str | None = None) -> ModelHost:
        """The backend's one in-memory copy of `base_model` (loaded on first use), held as
        `quantization` (default: the backend's --base-quantization)."""
        held = self.settings.base_quantization if quantization is None else quantization
        return self.compute.run(lambda: self.load_shared(base_model, held))

    def load_shared(self, base_model: str, quantization: str) -> ModelHost:
        """`shared_host` on the calling thread (the compute thread, or a rank > 0's only one)."""
        path = resolve_model(base_model)
        key = str(path) if quantization == "none" else f"{path} ({quantization})"
        with self._lock:
            host = self._hosts.get(key)
            if host is None:
                self.ranks.tell(LoadBase(base_model, quantization))
                host = self._load(base_model, model_path=path, quantization=quantization)
                self.ranks.hold_shared(host)
                self._hosts[key] = host
        return host

    def _load(
        self, model_name: str, model_path: Path | None = None, quantization: str = "none"
    ) -> ModelHost:
        """Load a model, then fit torch's thread count to the largest model this backend holds."""
        host = load_host(
            model_name, self.settings, model_path=model_path, quantization=quantization
        )
        self._largest_model = max(
            self._largest_model, sum(p.numel() for p in host.base.parameters())
        )
        apply_num_threads(choose_num_threads(self.settings, self._largest_model))
        return host

    def sampling_client_for(
        self, host: ModelHost, snapshot: LoraSnapshot | None, model_path: str | None = None
    ) -> LocalSamplingClient:
        local = LocalSamplingClient(
            host,
            snapshot,
            self.compute,
            self.settings.seed,
            model_path,
            self.stability,
            microbatch_tokens=self.settings.microbatch_tokens,
            ranks=self.ranks if host.sharded else SOLO,
            spread=self.settings.spread_sampling,
        )
        if self._remote_factory is not None:  # vLLM samples; the local one scores prompts
            eos = model_eos_ids(host)
            return self.remote().sampling_client(host, snapshot, model_path, eos, local)  # type: ignore[no-any-return]
        return local

    def copy_host(self, host: ModelHost) -> ModelHost:
        """A frozen copy of a (fully fine-tuned) model: the sampler snapshot of full fine-tuning."""
        with host.lock:
            model = copy.deepcopy(host.base)
        model.requires_grad_(False)
        frozen = ModelHost(
            host.model_name,
            host.model_path,
            model,
            host.tokenizer,
            host.autocast_dtype,
            host.attention,
        )
        frozen.freeze()
        return frozen

    def host_with(self, host: ModelHost, weights: dict[str, Any]) -> ModelHost:
        """Rank 0: a frozen whole copy of a sharded, fully fine-tuned `host` holding `weights`
        (gathered whole, sharded_model.whole_weights): the model is read anew and its weights
        replaced, so it costs the model's size twice while they are copied."""
        copy = self._load(host.model_name, model_path=host.model_path)
        copy.base.load_state_dict(weights)
        copy.freeze()
        return copy

    def _from_state(self, path: str, with_optimizer: bool) -> LocalTrainingClient:
        folder = ckpt.parse_checkpoint_path(path)
        meta = ckpt.read_meta(folder)
        if meta.kind != "state":
            raise BackendError(
                f"checkpoint {folder} holds sampler weights; resuming needs a save_state folder"
            )
        lora = LoraSpec(**meta.lora) if meta.lora else None
        client = self.lora_training_client(
            LoraRequest(
                meta.base_model,
                rank=lora.rank if lora else 0,
                seed=meta.seed,
                train_mlp=lora.train_mlp if lora else True,
                train_attn=lora.train_attn if lora else True,
                train_unembed=lora.train_unembed if lora else True,
                train_vision=lora.train_vision if lora else False,
                user_metadata=None,
            )
        )
        load = client.load_state_with_optimizer if with_optimizer else client.load_state
        load(str(folder)).result()
        return client

    def _sampler_from_path(self, model_path: str) -> LocalSamplingClient:
        folder = ckpt.parse_checkpoint_path(model_path)
        meta = ckpt.read_meta(folder)
        if meta.lora is not None:
            # The base the adapter was trained on: a 4-bit one if it was.
            host = self.shared_host(meta.base_model, meta.base_quantization)
            snapshot = snapshot_from(folder, host)
            command = LoadSnapshot(
                meta.base_model, meta.base_quantization, str(folder), snapshot.snapshot_id
            )
            self.ranks.share(snapshot, command)  # every rank samples from it
            return self.sampling_client_for(host, snapshot, model_path=str(folder))
        if self._remote_factory is not None:
            raise ConfigError(
                f"{folder} holds fully fine-tuned weights; --sampler vllm samples a base model "
                "plus LoRA adapters, so sample it with --sampler local"
            )
        if meta.kind == "sampler":  # a complete model folder
            host = self._load(meta.base_model, model_path=folder)
        else:  # a full fine-tuning state: base architecture + saved weights
            host = self._load(meta.base_model)
            ckpt.load_full_state(folder, host.base)
        host.freeze()
        return self.sampling_client_for(host, None, model_path=str(folder))


def executor() -> Executor:
    """This process's executor: ranked when launched with --nproc > 1, else solo."""
    ranked = ranked_executor()
    return SOLO if ranked is None else ranked


def snapshot_from(folder: Path, host: ModelHost, snapshot_id: int | None = None) -> LoraSnapshot:
    """The adapter saved in `folder`, on `host`'s device (`snapshot_id`: rank 0's)."""
    tensors = ckpt.load_lora_tensors(folder, host.device)
    return LoraSnapshot.of(ckpt.load_lora_config(folder), tensors, snapshot_id)
