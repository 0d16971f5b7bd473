"""The API key and service address for `--backend tinker`, checked before the SDK is touched.

The key comes from TINKER_API_KEY only (never a flag, never a config file) and is never printed
or logged: errors name the variable and what is wrong with it, not its value.
"""

from __future__ import annotations

import os

from kitchen.engine.errors import ConfigError
from kitchen.engine.secrets import REDACTED

API_KEY_ENV = "TINKER_API_KEY"
BASE_URL_ENV = "TINKER_BASE_URL"
# Prefixes the SDK 0.38.0 accepts: Tinker API keys, and JWTs (dynamic credentials).
_KEY_PREFIXES = ("tml-", "eyJ")


def api_key_from_env() -> str:
    """TINKER_API_KEY, validated; a ConfigError naming the problem (not the value) otherwise."""
    key = os.environ.get(API_KEY_ENV, "")
    if not key.strip():
        raise ConfigError(
            f"--backend tinker needs an API key: set {API_KEY_ENV} (for `kitchen serve`, any "
            "key starting with tml- works unless the server requires a specific one)"
        )
    if key != key.strip() or any(not (32 < ord(c) < 127) for c in key):
        raise ConfigError(
            f"{API_KEY_ENV} is malformed: it contains whitespace or non-printable characters "
            "(check for a trailing newline or quotes)"
        )
    if not key.startswith(_KEY_PREFIXES):
        raise ConfigError(f"{API_KEY_ENV} is malformed: a Tinker API key starts with 'tml-'")
    return key


def base_url(configured: str | None) -> str | None:
    """The service address: the run's setting, else TINKER_BASE_URL, else the SDK's default."""
    url = configured or os.environ.get(BASE_URL_ENV) or None
    if url is not None and not url.startswith(("http://", "https://")):
        raise ConfigError(f"Tinker base URL {url!r}: expected http://HOST:PORT or https://...")
    return url.rstrip("/") if url else None


def scrub(text: str, key: str | None) -> str:
    """`text` with the key replaced, for messages built from SDK errors."""
    return text.replace(key, REDACTED) if key else text
