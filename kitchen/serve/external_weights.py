"""save_weights_external and the downloads of what it wrote, as tinker-cookbook's
`weights.download` and `tinker checkpoint download` fetch them.

An export is the model's sampler weights (PEFT's adapter_model.safetensors + adapter_config.json
for LoRA, a transformers folder for full fine-tuning) in `<root>/external_weights/<slug>--<name>/`,
each file age-encrypted to the request's recipients when it names any (stored as `<file>.age`, as
the service does). `external_weights_urls` hands out one URL per file, signed with an HMAC of its
path and expiry: `urllib.request.urlretrieve` sends no API key, so the signature is the credential.
TTLs are accepted and not enforced (a local server keeps what it wrote until it is deleted).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tinker import types

from kitchen.serve.errors import UserError

DOWNLOAD_PREFIX = "/kitchen/v1/external_weights/"
URL_LIFETIME_S = 3600
AGE_SUFFIX = ".age"


def export_folder(sampler_folder: Path, dest: Path, recipients: list[str] | None) -> int:
    """Move a fresh sampler save into `dest` (replacing an older export of that name), encrypting
    every file to `recipients` when given; returns the export's size in bytes."""
    try:
        if recipients:
            _encrypt_files(sampler_folder, recipients)
    except BaseException:
        shutil.rmtree(sampler_folder, ignore_errors=True)
        raise
    dest.parent.mkdir(parents=True, exist_ok=True)
    if dest.exists():
        shutil.rmtree(dest)
    os.replace(sampler_folder, dest)
    return sum(f.stat().st_size for f in dest.rglob("*") if f.is_file())


def check_recipients(recipients: list[str] | None) -> None:
    """Refuse at once what cannot be encrypted to (before any weights are written)."""
    if recipients:
        _age_recipients(recipients)


def _age_recipients(recipients: list[str]) -> list[Any]:
    try:
        import pyrage
    except ImportError:
        raise UserError(
            "age_encryption_recipients: this server cannot encrypt (pip install pyrage, the "
            "serve extra's age library)"
        ) from None
    if len(recipients) > 10:
        raise UserError(f"age_encryption_recipients: at most 10, got {len(recipients)}")
    parsed = []
    for text in recipients:
        kind = pyrage.ssh if text.startswith("ssh-") else pyrage.x25519
        try:
            parsed.append(kind.Recipient.from_str(text))
        except pyrage.RecipientError:
            raise UserError(
                f"age_encryption_recipients: {text[:24]!r} is not an age1... or SSH public key"
            ) from None
    return parsed


def _encrypt_files(folder: Path, recipients: list[str]) -> None:
    import pyrage

    keys = _age_recipients(recipients)
    for plain in [f for f in folder.rglob("*") if f.is_file()]:
        pyrage.encrypt_file(str(plain), str(plain) + AGE_SUFFIX, keys)
        plain.unlink()


def signature(secret: bytes, url_path: str, expires: int) -> str:
    return hmac.new(secret, f"{url_path}\n{expires}".encode(), hashlib.sha256).hexdigest()


def signed_urls(
    secret: bytes, base_url: str, folder: Path, now: float
) -> types.ExternalWeightsUrlsResponse:
    """One URL per file of an export, all valid for URL_LIFETIME_S from `now`."""
    expires = int(now) + URL_LIFETIME_S
    urls = {}
    for file in sorted(f for f in folder.rglob("*") if f.is_file()):
        relative = file.relative_to(folder).as_posix()
        url_path = f"{DOWNLOAD_PREFIX}{folder.name}/{relative}"
        sig = signature(secret, url_path, expires)
        urls[relative] = f"{base_url.rstrip('/')}{url_path}?expires={expires}&signature={sig}"
    return types.ExternalWeightsUrlsResponse(
        urls=urls, expires=datetime.fromtimestamp(expires, UTC)
    )
