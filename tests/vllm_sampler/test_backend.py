"""`--sampler vllm` wired into the local engine (against the stand-in server): the engine trains,
vLLM samples each snapshot under its own name, the engine scores prompts; what vLLM cannot serve is
refused at start-up; the flags."""

from __future__ import annotations

import pytest
from tinker import types

from kitchen.adapters.local.backend import LocalBackend
from kitchen.adapters.samplers import remote_samplers
from kitchen.app.resolve import parse_overrides
from kitchen.engine.errors import ConfigError
from kitchen.ports import BackendSettings
from kitchen.workflows.common.config import TrainConfig
from tests.vllm_sampler.fake_vllm import FakeVllm


def vllm_backend(tmp_path, url: str) -> LocalBackend:
    extra = {"sampler": "vllm", "vllm_urls": [url]}
    return LocalBackend(
        BackendSettings(log_dir=tmp_path, seed=0, extra=extra), remote_samplers(extra)
    )


def test_snapshots_sample_on_vllm_and_prompts_score_on_the_engine(tmp_path):
    with FakeVllm() as fake:
        backend = vllm_backend(tmp_path, fake.url)
        try:
            client = backend.create_lora_training_client("kitchen/tiny-llama", rank=4)
            sampler = client.save_weights_and_get_sampling_client()
            out = sampler.sample(
                types.ModelInput.from_ints([3, 10, 20]),
                2,
                types.SamplingParams(max_tokens=3, seed=1),
                include_prompt_logprobs=True,
            ).result()
            scored = sampler.compute_logprobs(types.ModelInput.from_ints([3, 10, 20])).result()
        finally:
            backend.close()
    (load,) = fake.bodies("/v1/load_lora_adapter")
    (body,) = fake.bodies("/v1/completions")
    assert body["model"] == load["lora_name"] == sampler.model
    assert [s.tokens for s in out.sequences] == [[21, 22, 23], [22, 24, 26]]
    # The engine's scores of the same weights: real logprobs, not the stand-in's.
    assert scored[0] is None and all(-20 < x < 0 for x in scored[1:])
    assert out.prompt_logprobs == pytest.approx(scored)
    # The tiny model's EOS tokens (its generation config) are the stop tokens.
    assert set(body["stop_token_ids"]) == {0, 2, 7}


def test_full_fine_tuning_is_refused_before_anything_loads(tmp_path):
    backend = vllm_backend(tmp_path, "http://127.0.0.1:9")
    try:
        with pytest.raises(ConfigError, match="--lora-rank 0") as refused:
            backend.create_lora_training_client("kitchen/tiny-llama", rank=0)
    finally:
        backend.close()
    assert "\n" not in str(refused.value) and backend.hosts() == []


def test_sampler_flags():
    values = parse_overrides(
        TrainConfig,
        ["--sampler", "vllm", "--vllm-url", "http://a:8000", "--vllm-url", "http://b:8000"],
        "sl_basic",
    )
    cfg = TrainConfig.model_validate(values)
    assert cfg.sampler == "vllm" and cfg.vllm_url == ["http://a:8000", "http://b:8000"]
    with pytest.raises(Exception, match="local"):
        TrainConfig.model_validate({"sampler": "sglang"})
    with pytest.raises(ConfigError, match="expected http"):
        extra = {"sampler": "vllm", "vllm_urls": ["a:8000"]}
        LocalBackend(BackendSettings(extra=extra), remote_samplers(extra)).remote()
