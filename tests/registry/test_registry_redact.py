"""Secrets never reach the registry; the config hash ignores them and key order."""

from __future__ import annotations

import copy

import pytest

from kitchen.adapters.model_registry import config_hash
from kitchen.engine.errors import ConfigError
from kitchen.engine.secrets import is_secret_key, redact


@pytest.mark.parametrize(
    "key",
    [
        "api_key",
        "TINKER_API_KEY",
        "wandbApiKey",
        "hf_token",
        "HF_TOKEN",
        "access-token",
        "client_secret",
        "AWS_SECRET_ACCESS_KEY",
        "db_password",
        "token",
        "private_key",
    ],
)
def test_credential_keys_are_secret(key: str) -> None:
    assert is_secret_key(key)


@pytest.mark.parametrize(
    "key",
    [
        "max_tokens",
        "tokenizer",
        "tokenizer_name",
        "eos_token",
        "pad_token",
        "num_tokens",
        "sort_key",
        "key",
        "model_name",
        "learning_rate",
    ],
)
def test_ordinary_keys_are_not_secret(key: str) -> None:
    assert not is_secret_key(key)


def test_redact_replaces_nested_secrets_and_leaves_the_input_alone() -> None:
    config = {
        "max_tokens": 64,
        "api_key": "sk-1",
        "backend": {"TINKER_API_KEY": "tml-2", "url": "http://x"},
        "sinks": [{"name": "wandb", "wandb_api_key": "w-3"}, "jsonl"],
        "hf_token": None,
    }
    original = copy.deepcopy(config)
    redacted = redact(config)
    assert config == original
    assert redacted == {
        "max_tokens": 64,
        "api_key": "<redacted>",
        "backend": {"TINKER_API_KEY": "<redacted>", "url": "http://x"},
        "sinks": [{"name": "wandb", "wandb_api_key": "<redacted>"}, "jsonl"],
        "hf_token": None,  # nothing set, nothing to hide
    }


def test_config_hash_ignores_secrets_and_key_order_but_not_settings() -> None:
    a = {"lr": 1e-4, "backend": {"api_key": "one", "name": "tinker"}}
    b = {"backend": {"name": "tinker", "api_key": "two"}, "lr": 1e-4}
    assert config_hash(a) == config_hash(b)
    assert config_hash(a) != config_hash({**a, "lr": 2e-4})
    assert len(config_hash(a)) == 64


def test_non_json_config_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="not plain JSON"):
        config_hash({"lr": object()})
    with pytest.raises(ConfigError, match="not plain JSON"):
        config_hash({"lr": float("nan")})
