"""Checkpoint folders of the local engine, addressed by absolute path.

    <checkpoint_root>/weights/<name>/          save_state: weights + optimizer (resumable)
        kitchen_checkpoint.json                what it is: kind, base model, LoRA spec, step
        adapter_model.safetensors, adapter_config.json   (LoRA; peft's own format)
        model.safetensors                      (full fine-tuning instead)
        optimizer.pt                           AdamW state dict
        sharded/                               instead of optimizer.pt, full fine-tuning at
                                               --nproc N > 1: the shards of the weights and the
                                               AdamW state (torch.distributed.checkpoint)
    <checkpoint_root>/sampler_weights/<name>/  save_weights_for_sampler: weights only; for full
                                               fine-tuning a complete transformers model folder

Paths handed out are plain absolute paths; `local://<abs path>` is accepted too. A folder is
written beside its final place and renamed into it, so a crash never leaves half a checkpoint.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from kitchen.engine.errors import BackendError

META_FILE = "kitchen_checkpoint.json"
ADAPTER_WEIGHTS = "adapter_model.safetensors"
FULL_WEIGHTS = "model.safetensors"
OPTIMIZER_FILE = "optimizer.pt"
SHARDED_DIR = "sharded"
_SUBDIR = {"state": "weights", "sampler": "sampler_weights"}
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


@dataclass(frozen=True)
class CheckpointMeta:
    """The sidecar every checkpoint folder carries; enough to rebuild the client that wrote it."""

    kind: str  # "state" | "sampler"
    base_model: str  # the name the client was created with (e.g. kitchen/tiny-llama)
    model_path: str  # the folder that name resolved to when saving
    lora: dict[str, Any] | None  # LoraSpec fields; None for full fine-tuning
    seed: int
    step: int  # updates (optim_step calls) taken when saved
    # Ranks of the run that saved (--nproc N). Any N resumes it: LoRA and its Adam state are
    # whole on every rank; full fine-tuning's shards are resharded on load (SHARDED_DIR).
    world_size: int = 1
    # "none" | "nf4": how the base the weights were trained on was held (LoRA on a 4-bit base is
    # sampled and exported against that base dequantized, quantization.py)
    base_quantization: str = "none"

    def write(self, folder: Path) -> None:
        (folder / META_FILE).write_text(json.dumps(asdict(self), indent=2) + "\n")


def checkpoint_folder(root: Path, kind: str, name: str) -> Path:
    if not _NAME.match(name):
        raise BackendError(
            f"checkpoint name {name!r} must be letters, digits, '.', '_' or '-' (one path part)"
        )
    return root / _SUBDIR[kind] / name


def write_folder(dest: Path, fill: Callable[[Path], None]) -> Path:
    """Run `fill(tmp)` then move tmp to `dest`, replacing an older checkpoint of the same name.

    A kill mid-write leaves only a `.<name>.tmp-*` folder, which nothing names and the next save
    of that name removes; a write error (a full disk) removes it at once and names `dest`."""
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        for stale in dest.parent.glob(f".{glob.escape(dest.name)}.tmp-*"):
            shutil.rmtree(stale, ignore_errors=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.tmp-", dir=dest.parent))
    except OSError as e:
        raise BackendError(f"cannot write checkpoint {dest}: {e.strerror or e}") from e
    try:
        fill(tmp)
        tmp.chmod(0o755)
        if dest.exists():
            shutil.rmtree(dest)
        os.replace(tmp, dest)
    except BaseException as e:
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(e, Exception):
            raise BackendError(f"cannot write checkpoint {dest}: {_write_failure(e, dest)}") from e
        raise
    return dest


def _write_failure(error: Exception, dest: Path) -> str:
    """Why a write failed, in one line. torch and safetensors report a full disk as their own
    errors ("file write failed"), so the disk's free space is added to those."""
    if isinstance(error, OSError) and error.strerror:
        return error.strerror
    first = (str(error).strip().splitlines() or [type(error).__name__])[-1]
    try:
        free = shutil.disk_usage(dest.parent).free
    except OSError:
        return first
    return f"{type(error).__name__}: {first} ({free} bytes free on that disk)"


def parse_checkpoint_path(path: str) -> Path:
    """The folder behind a path this engine handed out; a clear error for anything else."""
    if path.startswith("tinker://"):
        raise BackendError(
            f"checkpoint {path} is a Tinker service path; the local engine reads folders it wrote itself"
        )
    folder = Path(path.removeprefix("local://")).expanduser()
    if not (folder / META_FILE).is_file():
        raise BackendError(
            f"checkpoint {folder} has no {META_FILE}; expected a folder written by the local engine"
        )
    return folder


def read_meta(folder: Path) -> CheckpointMeta:
    try:
        raw = json.loads((folder / META_FILE).read_text())
        return CheckpointMeta(**raw)
    except (OSError, ValueError, TypeError) as e:
        raise BackendError(f"checkpoint {folder}/{META_FILE} is unreadable: {e}") from e


def save_lora(folder: Path, tensors: dict[str, Any], peft_config: Any, model_path: str) -> None:
    from safetensors.torch import save_file

    save_file(
        {k: v.detach().contiguous().cpu() for k, v in tensors.items()},
        str(folder / ADAPTER_WEIGHTS),
    )
    config = peft_config.to_dict()
    config["base_model_name_or_path"] = model_path
    config["target_modules"] = sorted(config["target_modules"])
    (folder / "adapter_config.json").write_text(json.dumps(config, indent=2, default=str) + "\n")


def load_lora_tensors(folder: Path, device: Any) -> dict[str, Any]:
    from safetensors.torch import load_file

    return load_file(str(folder / ADAPTER_WEIGHTS), device=str(device))


def load_lora_config(folder: Path) -> Any:
    from peft import LoraConfig

    return LoraConfig.from_pretrained(str(folder))


def save_full_state(folder: Path, model: Any) -> None:
    from safetensors.torch import save_model

    save_model(model, str(folder / FULL_WEIGHTS))


def save_full_tensors(folder: Path, tensors: dict[str, Any]) -> None:
    """Whole weights gathered from shards, as save_full_state writes them (one of tied twins)."""
    from safetensors.torch import save_file

    save_file({k: v.contiguous() for k, v in tensors.items()}, str(folder / FULL_WEIGHTS))


def load_full_tensors(folder: Path) -> dict[str, Any]:
    from safetensors.torch import load_file

    return load_file(str(folder / FULL_WEIGHTS))


def load_full_state(folder: Path, model: Any) -> None:
    from safetensors.torch import load_model

    missing, unexpected = load_model(model, str(folder / FULL_WEIGHTS), strict=False)
    if unexpected or any(not _is_tied(model, k) for k in missing):
        raise BackendError(
            f"checkpoint {folder}: weights do not match the model (missing {missing[:3]}, unexpected {unexpected[:3]})"
        )


def _is_tied(model: Any, key: str) -> bool:
    # save_model writes one copy of tied tensors (e.g. lm_head = embed_tokens); the twin is restored by tying.
    return bool(getattr(model.config, "tie_word_embeddings", False))


def save_optimizer(folder: Path, optimizer: Any) -> None:
    import torch

    torch.save(optimizer.state_dict(), folder / OPTIMIZER_FILE)


def read_optimizer(folder: Path) -> dict[str, Any]:
    import torch

    file = folder / OPTIMIZER_FILE
    if not file.is_file():
        raise BackendError(
            f"checkpoint {folder} has no optimizer state; it was not written by save_state"
        )
    return torch.load(file, weights_only=True, map_location="cpu")  # type: ignore[no-any-return]


def load_optimizer(folder: Path, optimizer: Any) -> None:
    saved = read_optimizer(folder)
    try:
        optimizer.load_state_dict(saved)
    except (ValueError, RuntimeError, KeyError) as e:
        raise BackendError(
            f"checkpoint {folder}: optimizer state does not fit this client: {e}"
        ) from e
