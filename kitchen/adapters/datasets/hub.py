"""Hugging Face hub datasets through `datasets.load_dataset`, imported lazily.

The local cache (`HF_DATASETS_CACHE` / `HF_HOME`, or the store's `cache_dir`) and `HF_HUB_OFFLINE`
are honoured. A miss must fail fast and say so: on a machine without network `datasets` spends
~25-50 s in retries before giving up, so when the hub endpoint cannot even be connected to, the
load runs in offline mode (cache only) for that call.
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
from collections.abc import Iterator
from urllib.parse import urlparse

from kitchen.adapters.datasets.rows import Rows, SplitSpec
from kitchen.engine.errors import DataError

_HUB_NAME_RE = re.compile(r"^[A-Za-z0-9][\w.\-]*(/[A-Za-z0-9][\w.\-]*)?$")
_TRUE = {"1", "true", "yes", "on"}


def parse_hub_name(source: str) -> tuple[str, str | None]:
    """ "org/name" or "org/name:config" -> (name, config)."""
    name, _, config = source.partition(":")
    if not _HUB_NAME_RE.match(name) or (config and not re.match(r"^[\w.\-]+$", config)):
        raise DataError(
            f'dataset "{source}" is not a bundled name, an existing local file, or a Hugging Face '
            'hub name; expected "bundled:NAME", a .jsonl/.json/.parquet/.arrow path, or '
            '"org/name[:config]"'
        )
    return name, config or None


def offline_mode() -> bool:
    """True when the environment forbids network access to the hub."""
    return any(
        os.environ.get(var, "").strip().lower() in _TRUE
        for var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE")
    )


def hub_reachable(timeout_s: float = 2.0) -> bool:
    """Whether a TCP connection to the hub endpoint opens; True behind a proxy (cannot tell)."""
    if any(os.environ.get(v) for v in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")):
        return True
    endpoint = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    host = endpoint.hostname or "huggingface.co"
    port = endpoint.port or (80 if endpoint.scheme == "http" else 443)
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True
    except OSError:
        return False


@contextlib.contextmanager
def _cache_only() -> Iterator[None]:
    """Make `datasets` and `huggingface_hub` behave as under HF_HUB_OFFLINE=1 for one call.

    Both libraries read the environment once at import, so the flags are set on their config
    modules, which they consult at call time.
    """
    import datasets.config
    import huggingface_hub.constants

    saved = (datasets.config.HF_HUB_OFFLINE, huggingface_hub.constants.HF_HUB_OFFLINE)
    datasets.config.HF_HUB_OFFLINE = True
    huggingface_hub.constants.HF_HUB_OFFLINE = True
    try:
        yield
    finally:
        datasets.config.HF_HUB_OFFLINE, huggingface_hub.constants.HF_HUB_OFFLINE = saved


def load_hub(source: str, split: str, spec: SplitSpec, cache_dir: str | None) -> Rows:
    """Rows of hub dataset `source` ("org/name[:config]"), split `split` as `datasets` reads it."""
    import datasets

    name, config = parse_hub_name(source)
    offline = offline_mode()
    unreachable = not offline and not hub_reachable()
    guard = _cache_only() if unreachable else contextlib.nullcontext()
    try:
        with guard:
            loaded = datasets.load_dataset(name, config, split=split, cache_dir=cache_dir)
    except (ConnectionError, FileNotFoundError) as e:
        if offline or unreachable:
            why = "HF_HUB_OFFLINE is set" if offline else "the hub cannot be reached"
            raise DataError(
                f"dataset {source} ({split}) is not in the local Hugging Face cache and {why}; "
                "download it once with network access, or pass a local .jsonl/.parquet file"
            ) from None
        raise DataError(
            f"dataset {source}: not found on the Hugging Face hub ({_first_line(e)})"
        ) from None
    except ValueError as e:  # unknown config or split
        raise DataError(f"dataset {source} ({split}): {_first_line(e)}") from None
    if not isinstance(loaded, datasets.Dataset):
        raise DataError(
            f"dataset {source} ({split}): loaded as {type(loaded).__name__}; "
            "expected a single split"
        )
    first = spec.start if spec.start is not None and spec.start >= 0 else 0
    return Rows(
        loaded.to_list(),
        f"dataset {source} ({spec.name})",
        indices=list(range(first, first + len(loaded))),
    )


def _first_line(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0]
