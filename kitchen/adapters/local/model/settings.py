"""Engine settings derived from `kitchen.ports.BackendSettings`: device, dtype, threads, batching."""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kitchen.adapters.local.model.context import ROPE_SCALINGS
from kitchen.adapters.local.model.quantization import QUANTIZATIONS
from kitchen.engine.errors import ConfigError
from kitchen.ports import BackendSettings

# --activation-checkpointing (memory.py applies it to a training pass).
CHECKPOINTING = ("auto", "on", "off")

# Padded tokens per forward/backward pass. On CPU small passes are faster and bound memory (DPO on
# SmolLM2: 8.6 s -> 4.8 s per forward_backward and half the peak RSS at 256 vs 4096); GPUs want big ones.
DEFAULT_MICROBATCH_TOKENS = {"cpu": 512, "cuda": 4096}
_DTYPES = {
    "float32": "float32",
    "fp32": "float32",
    "bfloat16": "bfloat16",
    "bf16": "bfloat16",
    "float16": "float16",
    "fp16": "float16",
}


@dataclass(frozen=True)
class EngineSettings:
    """What the local engine runs with; built once per backend by `from_backend_settings`."""

    device: str  # "cpu" | "cuda" | "cuda:N"
    dtype_name: (
        str  # compute dtype: "float32", or "bfloat16" | "float16" autocast over fp32 weights
    )
    seed: int
    checkpoint_root: Path  # `<log_dir>/checkpoints`, or a fresh temp folder when log_dir is None
    microbatch_tokens: int  # padded tokens per forward/backward pass; bounds activation memory
    num_threads: int | None  # torch intra-op threads; None = automatic (see choose_num_threads)
    cudnn_attention: bool = False  # let CUDA attention use cuDNN's kernels (attention.py)
    # auto | on | off: recompute decoder activations in backward instead of keeping them (memory.py)
    activation_checkpointing: str = "auto"
    # Lay a micro-batch's rows end to end instead of padding them (batching.py)
    packing: bool = False
    # Positions a model takes past its trained context, by rescaling its RoPE (context.py)
    context_length: int | None = None
    rope_scaling: str = "yarn"
    # none | nf4: the shared base's Linear layers held in 4 bits under LoRA (quantization.py)
    base_quantization: str = "none"
    # --nproc N > 1: every rank decodes a share of the sample requests' rows (docs/distributed.md)
    spread_sampling: bool = False

    @property
    def dtype(self) -> Any:
        import torch

        return getattr(torch, self.dtype_name)

    @property
    def autocast_dtype(self) -> Any:
        """The dtype forward passes autocast to; None for fp32. Weights and optimizer stay fp32."""
        return None if self.dtype_name == "float32" else self.dtype

    @classmethod
    def from_backend_settings(cls, settings: BackendSettings) -> EngineSettings:
        """Resolve "auto" values. `settings.extra` may hold `num_threads`, `microbatch_tokens`,
        `cudnn_attention`, `activation_checkpointing`, `packing`, `context_length`,
        `rope_scaling`, `base_quantization` and `spread_sampling`; the env vars KITCHEN_<KEY>
        (KITCHEN_NUM_THREADS, ...) are the fallbacks."""
        device = resolve_device(settings.device)
        if settings.dtype == "auto":
            # bf16 autocast is fast on GPUs and on CPUs with bf16 units (LoRA SFT of SmolLM2 on a
            # 2-core Zen 4: 1.54-1.69x fp32's tokens/s); without them the CPU emulates bf16 and fp32 wins.
            native = device != "cpu" or cpu_has_native_bf16()
            dtype_name = "bfloat16" if native else "float32"
        elif settings.dtype in _DTYPES:
            dtype_name = _DTYPES[settings.dtype]
        else:
            raise ConfigError(
                f"dtype {settings.dtype!r} is not supported; expected auto, float32 or bfloat16"
            )
        if settings.log_dir is not None:
            root = Path(settings.log_dir) / "checkpoints"
        else:
            root = Path(tempfile.mkdtemp(prefix="kitchen-checkpoints-"))
        return cls(
            device=device,
            dtype_name=dtype_name,
            seed=settings.seed,
            checkpoint_root=root.resolve(),
            microbatch_tokens=_positive_int(
                settings.extra,
                "microbatch_tokens",
                DEFAULT_MICROBATCH_TOKENS["cpu" if device == "cpu" else "cuda"],
            ),
            num_threads=_positive_int(settings.extra, "num_threads", None),
            cudnn_attention=_flag(settings.extra, "cudnn_attention"),
            activation_checkpointing=_choice(
                settings.extra, "activation_checkpointing", CHECKPOINTING
            ),
            packing=_flag(settings.extra, "packing"),
            context_length=_positive_int(settings.extra, "context_length", None),
            rope_scaling=_choice(settings.extra, "rope_scaling", ROPE_SCALINGS),
            base_quantization=_choice(settings.extra, "base_quantization", QUANTIZATIONS),
            spread_sampling=_flag(settings.extra, "spread_sampling"),
        )


def resolve_device(device: str) -> str:
    """The device the engine computes on for a `--device` value: "auto" is CUDA when torch sees
    one, else the CPU; anything else must name a device torch has."""
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError(
            f"device {device!r} asked for, but torch sees no CUDA device; use cpu or auto"
        )
    if device != "cpu" and not device.startswith("cuda"):
        raise ConfigError(
            f"device {device!r} is not supported by the local engine; expected auto, cpu or cuda"
        )
    return device


# CPU flags of hardware bf16 matmuls (Linux /proc/cpuinfo names): AVX-512 BF16 and AMX.
NATIVE_BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16"})


def cpu_has_native_bf16(cpuinfo: Path = Path("/proc/cpuinfo")) -> bool:
    """Whether the CPU lists a bf16 matmul flag; False where cpuinfo is unreadable (non-Linux)."""
    try:
        text = cpuinfo.read_text()
    except OSError:
        return False
    for line in text.splitlines():
        if line.startswith("flags"):
            return bool(NATIVE_BF16_FLAGS & set(line.partition(":")[2].split()))
    return False


def _positive_int(extra: dict[str, Any], key: str, default: int | None) -> Any:
    value = extra.get(key, os.environ.get(f"KITCHEN_{key.upper()}"))
    if value is None:
        return default
    try:
        number = int(value)
    except (TypeError, ValueError):
        number = 0
    if number <= 0:
        raise ConfigError(f"backend setting {key}={value!r} is not a positive integer")
    return number


def _choice(extra: dict[str, Any], key: str, choices: tuple[str, ...]) -> str:
    value = (
        str(extra.get(key, os.environ.get(f"KITCHEN_{key.upper()}", choices[0]))).strip().lower()
    )
    if value not in choices:
        raise ConfigError(f"backend setting {key}={value!r} is not one of {', '.join(choices)}")
    return value


def _flag(extra: dict[str, Any], key: str) -> bool:
    value = extra.get(key, os.environ.get(f"KITCHEN_{key.upper()}", "0"))
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off", ""):
        return False
    raise ConfigError(f"backend setting {key}={value!r} is not a boolean; expected 1 or 0")


# Below this size a model's matmuls are too small to gain from a second thread, and on a busy
# 2-core machine an OpenMP team waiting on a descheduled thread made tiny-model steps 50x slower.
SMALL_MODEL_PARAMS = 20_000_000


_process_default_threads: list[int] = []  # torch's thread count before any backend changed it


def choose_num_threads(settings: EngineSettings, largest_model_params: int) -> int:
    """Intra-op threads for the models loaded: the configured number if any, 1 while every model is
    small, else the count torch had before the first backend touched it (its physical cores)."""
    import torch

    if not _process_default_threads:
        _process_default_threads.append(torch.get_num_threads())
    if settings.num_threads is not None:
        return settings.num_threads
    return 1 if largest_model_params < SMALL_MODEL_PARAMS else _process_default_threads[0]


def apply_num_threads(threads: int) -> None:
    """torch has one intra-op pool per process, so this is process-wide."""
    import torch

    if torch.get_num_threads() != threads:
        torch.set_num_threads(threads)
