"""What `kitchen serve` runs with."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})


@dataclass
class ServeSettings:
    """Options of the Tinker-protocol server over the local engine."""

    host: str = "127.0.0.1"
    port: int = 8000
    preload: list[str] = field(default_factory=list)  # base models loaded at start-up
    require_key: bool = False  # refuse requests without an X-API-Key header
    api_key: str | None = None  # when set, the X-API-Key header must equal it
    checkpoint_dir: Path | None = None  # engine checkpoints live in <dir>/checkpoints
    # Folders besides the checkpoint root that clients may load checkpoints from (e.g. the
    # runs of `kitchen run --backend local`); nothing else on disk is reachable.
    allowed_checkpoint_dirs: list[Path] = field(default_factory=list)
    max_body_bytes: int = 256 * 2**20  # larger request bodies get 413
    seed: int = 0
    device: str = "auto"
    dtype: str = "auto"
    # torch intra-op threads in the server process: on a small machine the server and its client
    # would otherwise fight over every core.
    threads: int | None = 1
    activation_checkpointing: str = "auto"  # auto | on | off (adapters/local/train/memory.py)
    packing: bool = False  # padding-free micro-batches (adapters/local/train/batching.py)
    context_length: int | None = None  # past the trained context by RoPE scaling (context.py)
    rope_scaling: str = "yarn"
    sampler: str = "local"  # local | vllm (adapters/vllm/)
    vllm_urls: list[str] = field(default_factory=list)  # --sampler vllm: servers the user runs
    # The LoRA rank the vLLM it starts takes (vLLM fixes it at start-up, before any tenant).
    vllm_max_lora_rank: int = 32
    vllm_gpu_memory_utilization: float | None = None  # its share of one GPU shared with the trainer
    base_quantization: str = "none"  # none | nf4: 4-bit shared bases (local/model/quantization.py)
    spread_sampling: bool = False  # --nproc N > 1: each rank decodes a share (docs/distributed.md)
    poll_timeout_s: float = 20.0  # retrieve_future long-poll; the SDK's own timeout is 45 s
    # A session with no heartbeat for this long is finished and its queued work dropped; the SDK
    # heartbeats every 10 s, so three missed beats mean the client is gone.
    session_timeout_s: float = 30.0
    log_level: str = "warning"
