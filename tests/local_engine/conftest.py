"""Fixtures for the local engine tests: a private model cache, one shared backend, datum builders."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tinker import types

from tests.helpers import local_backend

TINY = "kitchen/tiny-llama"


@pytest.fixture(scope="package", autouse=True)
def private_model_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Tiny models are generated into a fresh cache, so these tests also cover generation."""
    cache = tmp_path_factory.mktemp("kitchen-cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KITCHEN_CACHE", str(cache))
        yield cache


@pytest.fixture(scope="package")
def backend(tmp_path_factory: pytest.TempPathFactory, private_model_cache: Path) -> Iterator[Any]:
    with local_backend(tmp_path_factory.mktemp("run")) as engine:
        yield engine


def take_grads(client: Any) -> dict[str, Any]:
    """The LoRA client's accumulated gradients by name (copies), cleared from its parameters."""
    from kitchen.adapters.local.model.lora import adapter_parameters

    params = adapter_parameters(client.host.model, client.adapter)
    out = {k: p.grad.detach().clone() for k, p in params.items() if p.grad is not None}
    for p in params.values():
        p.grad = None
    return out


def sft_datum(tokenizer: Any, text: str) -> types.Datum:
    """Next-token prediction on every token of `text`."""
    tokens = tokenizer.encode(text, add_special_tokens=False)
    return types.Datum(
        model_input=types.ModelInput.from_ints(tokens[:-1]),
        loss_fn_inputs={
            "target_tokens": np.asarray(tokens[1:], dtype=np.int64),
            "weights": np.ones(len(tokens) - 1, dtype=np.float32),
        },
    )


def rl_datum(
    prompt: list[int], target: int, sampling_logprob: float, advantage: float
) -> types.Datum:
    """One sampled token `target` after `prompt`: the prompt positions carry no advantage."""
    n = len(prompt)
    logprobs = np.zeros(n, dtype=np.float32)
    advantages = np.zeros(n, dtype=np.float32)
    logprobs[-1], advantages[-1] = sampling_logprob, advantage
    targets = np.asarray([*prompt[1:], target], dtype=np.int64)
    return types.Datum(
        model_input=types.ModelInput.from_ints(prompt),
        loss_fn_inputs={"target_tokens": targets, "logprobs": logprobs, "advantages": advantages},
    )


TEXTS = [
    "What is 12 + 35? The answer is 47.",
    "The kitchen opens before sunrise, when the ovens are still cold.",
    "def add(a, b):\n    return a + b",
]
