"""`--sampler vllm` for the local engine: the vLLM servers of a backend, and its sampling clients.

The trainer stays the local engine; every sampling client it hands out samples through vLLM. A
LoRA snapshot (`save_weights_and_get_sampling_client`) is written in peft's format and loaded into
vLLM under a name of its own (POST /v1/load_lora_adapter); when the last client on it is gone,
vLLM drops it and its folder is removed. What vLLM cannot serve is refused when the training
client is made, before any sample: full fine-tuning (vLLM serves a fixed base plus adapters).
"""

from __future__ import annotations

import itertools
import shutil
import sys
import threading
import time
import weakref
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kitchen.adapters.local.model.locate import kitchen_cache_dir
from kitchen.adapters.vllm.pool import ServerPool
from kitchen.adapters.vllm.sampling_client import VllmSamplingClient
from kitchen.adapters.vllm.server import (
    SERVED_BASE,
    ServerSpec,
    StartedServer,
    find_python,
    vllm_rank,
)
from kitchen.engine.errors import BackendError, ConfigError

_snapshot_names = itertools.count(1)


@dataclass(frozen=True)
class VllmSettings:
    """`--sampler vllm`'s options, from BackendSettings.extra (see `from_extra`)."""

    urls: tuple[str, ...] = ()  # servers the user runs; empty: Kitchen starts one
    env: str | None = None  # the vLLM environment (a venv folder); None: find_python's default
    start_timeout_s: float = 600.0
    request_timeout_s: float = 600.0
    gpu_memory_utilization: float | None = None
    max_loras: int = 4
    # The least --max-lora-rank a started server takes: `kitchen serve`, whose tenants come later
    # with ranks of their own, starts it before any; 0: the first training client's rank.
    max_lora_rank: int = 0

    @classmethod
    def from_extra(cls, extra: dict[str, Any]) -> VllmSettings:
        urls = extra.get("vllm_urls") or ()
        if isinstance(urls, str):
            urls = (urls,)
        for url in urls:
            if not str(url).startswith(("http://", "https://")):
                raise ConfigError(f"--vllm-url {url!r}: expected http://HOST:PORT")
        return cls(
            urls=tuple(str(u).rstrip("/") for u in urls),
            env=extra.get("vllm_env"),
            start_timeout_s=float(extra.get("vllm_start_timeout", 600.0)),
            request_timeout_s=float(extra.get("vllm_request_timeout", 600.0)),
            gpu_memory_utilization=extra.get("vllm_gpu_memory_utilization"),
            max_lora_rank=int(extra.get("vllm_max_lora_rank") or 0),
        )


def say_on_stderr(line: str, final: bool) -> None:
    """A progress line: rewritten in place on a terminal, else only its final form."""
    if sys.stderr.isatty():
        sys.stderr.write(f"\r\x1b[K{line}" + ("\n" if final else ""))
        sys.stderr.flush()
    elif final:
        print(line, file=sys.stderr, flush=True)


class _Base:
    """One base model's servers: the pool of their URLs, and the process when Kitchen started it."""

    def __init__(self, pool: ServerPool, started: StartedServer | None, model: str) -> None:
        self.pool = pool
        self.started = started
        self.model = model  # the name the servers serve the base under


class VllmSamplers:
    """The vLLM side of one local backend."""

    def __init__(
        self,
        settings: VllmSettings,
        *,
        dtype: str,
        checkpoint_root: Path,
        device: str = "cpu",
        seed: int,
        records: Any = None,
        say: Callable[[str, bool], None] = say_on_stderr,
    ) -> None:
        self.settings = settings
        self.dtype = dtype
        self.device = device
        self.snapshot_root = checkpoint_root / "vllm_snapshots"
        self.seed = seed
        self.records = records
        self._say = say
        self._bases: dict[str, _Base] = {}
        self._starting: dict[str, StartedServer] = {}
        self._lock = threading.Lock()

    # -- start-up ---------------------------------------------------------------------------------

    def check_trainable(self, lora_rank: int, model_path: Path) -> None:
        """Refuse at start-up what vLLM cannot sample, with what to change: full fine-tuning, and
        a LoRA rank above that of the server already started for `model_path` (vLLM fixes its
        --max-lora-rank when it starts)."""
        if lora_rank == 0:
            raise ConfigError(
                "--sampler vllm samples a base model plus LoRA adapters; full fine-tuning "
                "(--lora-rank 0) needs --sampler local, or a LoRA rank"
            )
        with self._lock:
            base = self._bases.get(str(model_path))
            started = base.started if base is not None else self._starting.get(str(model_path))
        if started is not None and lora_rank > started.spec.max_lora_rank:
            raise ConfigError(
                f"LoRA rank {lora_rank} is above the --max-lora-rank {started.spec.max_lora_rank} that "
                f"vLLM was started with for {model_path.name}; use a rank up to "
                f"{started.spec.max_lora_rank}, or start with a larger --vllm-max-lora-rank"
            )

    def start(self, host: Any, max_lora_rank: int) -> None:
        """Start the server for `host`'s base model, without waiting for it (the trainer loads
        meanwhile); nothing to start when the user gave --vllm-url."""
        key = str(host.model_path)
        with self._lock:
            if self.settings.urls or key in self._bases or key in self._starting:
                return
            rank = max(max_lora_rank, self.settings.max_lora_rank)
            spec = ServerSpec(
                model_path=host.model_path,
                dtype=self.dtype,
                max_lora_rank=vllm_rank(rank) if rank > 0 else 0,
                max_model_len=host.max_context,
                python=find_python(self.settings.env),
                # Outside the run directory: a run that fails before its first step has that
                # removed (app/rundir.py), and this log is then what says why.
                log_path=kitchen_cache_dir()
                / "vllm-logs"
                / f"vllm-{time.strftime('%Y%m%d-%H%M%S')}.log",
                max_loras=self.settings.max_loras,
                gpu_memory_utilization=self.settings.gpu_memory_utilization,
                cpu=self.device == "cpu",
            )
            self._starting[key] = StartedServer(spec, self._say)

    def base(self, host: Any) -> _Base:
        """The servers of `host`'s base model, ready (waits for a start-up under way)."""
        key = str(host.model_path)
        with self._lock:
            if key in self._bases:
                return self._bases[key]
            if self.settings.urls:
                pool = ServerPool(self.settings.urls, self.settings.request_timeout_s)
                self._bases[key] = _Base(pool, None, served_base(pool))
                return self._bases[key]
            started = self._starting.pop(key, None)
        if started is None:
            self.start(host, max_lora_rank=0)
            with self._lock:
                started = self._starting.pop(key)
        started.wait_ready(self.settings.start_timeout_s)
        pool = ServerPool([started.url], self.settings.request_timeout_s, started.explain)
        with self._lock:
            self._bases[key] = _Base(pool, started, SERVED_BASE)
            return self._bases[key]

    # -- sampling clients -------------------------------------------------------------------------

    def sampling_client(
        self,
        host: Any,
        snapshot: Any,
        model_path: str | None,
        eos_ids: Collection[int],
        scorer: Any,
    ) -> VllmSamplingClient:
        """A client on the base (`snapshot` None) or on a LoRA snapshot, loaded into vLLM now;
        `scorer` (the local engine's sampler on the same weights) scores its prompts."""
        base = self.base(host)
        name, folder = base.model, None
        if snapshot is not None:
            name, folder = self._load_snapshot(base, host, snapshot)
        client = VllmSamplingClient(
            base.pool,
            name,
            base_model=host.model_name,
            tokenizer=host.tokenizer,
            eos_ids=eos_ids,
            vocab_size=host.vocab_size,
            max_context=host.max_context,
            seed=self.seed,
            scorer=scorer,
            model_path=model_path,
            records=self.records,
        )
        if folder is not None:
            weakref.finalize(client, _drop_snapshot, base.pool, name, folder)
        return client

    def _load_snapshot(self, base: _Base, host: Any, snapshot: Any) -> tuple[str, Path]:
        from kitchen.adapters.local.clients import checkpoints as ckpt

        name = f"snapshot-{next(_snapshot_names)}"
        folder = ckpt.write_folder(
            self.snapshot_root / name,
            lambda f: ckpt.save_lora(f, snapshot.tensors, snapshot.config, str(host.model_path)),
        )
        body = {"lora_name": name, "lora_path": str(folder)}
        for future in base.pool.post_all("/v1/load_lora_adapter", body):
            try:
                future.result()
            except BackendError as e:
                shutil.rmtree(folder, ignore_errors=True)
                raise BackendError(f"vLLM could not load LoRA snapshot {name}: {e}") from None
        return name, folder

    def close(self) -> None:
        """Stop every server Kitchen started (and any still starting)."""
        with self._lock:
            bases, self._bases = list(self._bases.values()), {}
            starting, self._starting = list(self._starting.values()), {}
        for base in bases:
            base.pool.close()
            if base.started is not None:
                base.started.stop()
        for started in starting:
            started.stop()
        shutil.rmtree(self.snapshot_root, ignore_errors=True)


def served_base(pool: ServerPool) -> str:
    """The base model's name on a user's server: the one model /v1/models lists without a parent
    (LoRA adapters list their base as parent)."""
    try:
        listing = pool.get(pool.urls[0], "/v1/models")
    except Exception as e:
        raise BackendError(f"vLLM at {pool.urls[0]} did not list its models: {e}") from None
    bases = [m["id"] for m in listing.get("data", []) if not m.get("parent")]
    if not bases:
        raise BackendError(f"vLLM at {pool.urls[0]} serves no base model")
    return str(bases[0])


def _drop_snapshot(pool: ServerPool, name: str, folder: Path) -> None:
    pool.fire("/v1/unload_lora_adapter", {"lora_name": name})
    shutil.rmtree(folder, ignore_errors=True)


def for_local_engine(backend: Any) -> VllmSamplers:
    """`--sampler vllm`'s samplers for a local backend (kitchen/adapters/samplers.py hands this
    factory to it): its settings, dtype, checkpoint folder and stability records."""
    return VllmSamplers(
        VllmSettings.from_extra(backend.backend_settings.extra),
        dtype=backend.settings.dtype_name,
        checkpoint_root=backend.settings.checkpoint_root,
        device=backend.settings.device,
        seed=backend.settings.seed,
        records=backend.stability,
    )
