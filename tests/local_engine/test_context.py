"""Rows past a model's trained context: refused in one line naming --context-length, and trained
once --context-length rescales the model's RoPE (yarn or linear); a model whose positions cannot
be rescaled is refused in one line."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tinker import types

from kitchen.adapters.local import create_local_backend
from kitchen.adapters.local.model.context import extend_context
from kitchen.adapters.local.model.tiny import MAX_CONTEXT
from kitchen.engine.errors import BackendError, ConfigError
from kitchen.ports import BackendSettings
from tests.helpers import engine_device

from .conftest import TINY

PAST = MAX_CONTEXT + 52  # a row longer than the tiny model was built for


def long_datum(n: int) -> types.Datum:
    tokens = [3 + (7 * i) % 200 for i in range(n + 1)]
    return types.Datum(
        model_input=types.ModelInput.from_ints(tokens[:-1]),
        loss_fn_inputs={
            "target_tokens": np.asarray(tokens[1:], dtype=np.int64),
            "weights": np.ones(n, dtype=np.float32),
        },
    )


def engine(tmp_path: Path, **extra: Any) -> Any:
    settings = BackendSettings(
        log_dir=tmp_path, seed=0, dtype="float32", device=engine_device(), extra=extra
    )
    return create_local_backend(settings)


def test_a_row_past_the_trained_context_is_refused_naming_the_option(backend: Any) -> None:
    client = backend.create_lora_training_client(TINY, rank=4, seed=1)
    with pytest.raises(BackendError) as refused:
        client.forward_backward([long_datum(PAST)], "cross_entropy").result()
    message = str(refused.value)
    assert "\n" not in message
    assert f"{PAST} tokens" in message and f"at most {MAX_CONTEXT}" in message
    assert "--context-length" in message
    client.close()


@pytest.mark.parametrize("scaling", ["yarn", "linear"])
def test_context_length_trains_a_row_past_the_trained_context(tmp_path: Path, scaling: str) -> None:
    local = engine(tmp_path, context_length=2 * MAX_CONTEXT, rope_scaling=scaling)
    try:
        client = local.create_lora_training_client(TINY, rank=4, seed=1)
        model = client.host.base
        assert client.host.max_context == 2 * MAX_CONTEXT
        rope = model.config.rope_parameters
        assert (rope["rope_type"], rope["factor"]) == (scaling, 2.0)
        # the rescaling reached the rotary embedding the layers use, not only the config
        rotary = model.model.rotary_emb
        unscaled = 1.0 / rope["rope_theta"] ** (
            np.arange(0, rotary.inv_freq.numel() * 2, 2) / (rotary.inv_freq.numel() * 2)
        )
        assert not np.allclose(rotary.inv_freq.cpu().numpy(), unscaled, rtol=1e-4)
        if scaling == "yarn":
            assert rotary.attention_scaling == pytest.approx(0.1 * math.log(2.0) + 1.0)
        data = [long_datum(PAST)]
        first = client.forward_backward(data, "cross_entropy").result()
        client.optim_step(types.AdamParams(learning_rate=1e-2)).result()
        second = client.forward(data, "cross_entropy").result()
        loss = first.metrics["loss:sum"]
        assert math.isfinite(loss) and second.metrics["loss:sum"] < loss
        client.close()
    finally:
        local.close()


def test_a_model_without_rope_is_refused_in_one_line() -> None:
    from transformers import GPT2Config, LlamaConfig

    with pytest.raises(ConfigError) as learned:
        extend_context(GPT2Config(n_positions=64), 128, "yarn", "org/gpt2-like")
    message = str(learned.value)
    assert "\n" not in message and "no rotary position embeddings" in message
    assert "at most 64 tokens" in message and "--context-length 128" in message

    scaled = LlamaConfig(
        max_position_embeddings=64, rope_parameters={"rope_type": "linear", "factor": 2.0}
    )
    with pytest.raises(ConfigError, match="already scales its RoPE"):
        extend_context(scaled, 128, "yarn", "org/scaled")
    # a length the model takes already changes nothing
    plain = LlamaConfig(max_position_embeddings=64)
    assert extend_context(plain, 64, "yarn", "org/plain").rope_parameters["rope_type"] == "default"


def test_the_engine_refuses_an_unknown_scaling(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="rope_scaling='ntk'"):
        engine(tmp_path, context_length=4096, rope_scaling="ntk")
