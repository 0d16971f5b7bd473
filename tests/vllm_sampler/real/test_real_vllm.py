"""The real vLLM (`make test-vllm`): Kitchen starts it for the tiny model, samples the base and a
LoRA snapshot (unembedding included) with Tinker's meaning, and stops it. One start-up (70-400 s on
a busy 2-core machine), so one test."""

from __future__ import annotations

import os

import numpy as np
import pytest
from tinker import types

from kitchen.adapters.local.backend import LocalBackend
from kitchen.adapters.vllm.server import find_python
from kitchen.engine.errors import ConfigError
from kitchen.ports import BackendSettings

pytestmark = pytest.mark.vllm


def _vllm_env() -> None:
    try:
        find_python(None)
    except ConfigError as e:
        pytest.skip(str(e))


def gap(sampler, prompt: types.ModelInput, out: types.SampleResponse) -> float:
    """Mean |vLLM's logprob - the engine's| over the sampled tokens."""
    diffs = []
    for seq in out.sequences:
        full = types.ModelInput.from_ints(prompt.to_ints() + seq.tokens)
        engine = sampler.scorer.compute_logprobs(full).result()[prompt.length :]
        diffs += [abs(a - b) for a, b in zip(engine, seq.logprobs, strict=True)]
    return float(np.mean(diffs))


def test_kitchen_samples_base_and_snapshot_on_vllm_with_tinkers_meaning(tmp_path, capsys):
    import torch

    _vllm_env()
    extra = {"sampler": "vllm", "vllm_start_timeout": 900}
    backend = LocalBackend(BackendSettings(log_dir=tmp_path, seed=0, extra=extra))
    prompt = types.ModelInput.from_ints([3, 10, 20, 30, 40])
    try:
        client = backend.create_lora_training_client("kitchen/tiny-llama", rank=8)
        with torch.no_grad():  # a snapshot unlike the base, unembedding included
            for name, p in client.host.model.named_parameters():
                if "lora_B" in name:
                    p.normal_(0, 0.05)
        snapshot = client.save_weights_and_get_sampling_client()
        base = backend.create_sampling_client(base_model="kitchen/tiny-llama")
        # At temperature 1 the sampled logprob is the model's own, which compute_logprobs gives;
        # at another temperature it is log_softmax(logits / T) (completions.py), a different number.
        params = types.SamplingParams(max_tokens=12, seed=7, temperature=1.0)
        on_snapshot = snapshot.sample(prompt, 4, params).result()
        on_base = base.sample(prompt, 4, params).result()
        again = snapshot.sample(prompt, 4, params).result()
        stop_at = on_snapshot.sequences[0].tokens[2]
        stopped = snapshot.sample(
            prompt, 1, types.SamplingParams(max_tokens=12, seed=7, temperature=0.8, stop=[stop_at])
        ).result()
        gaps = (gap(snapshot, prompt, on_snapshot), gap(base, prompt, on_base))
        pid = backend.vllm()._bases[next(iter(backend.vllm()._bases))].started.proc.pid
    finally:
        backend.close()
    # float32 on both sides here: the same numbers up to summation order.
    assert max(gaps) < 1e-3, gaps
    assert [s.tokens for s in on_snapshot.sequences] != [s.tokens for s in on_base.sequences]
    assert [s.tokens for s in again.sequences] == [s.tokens for s in on_snapshot.sequences]
    assert stopped.sequences[0].tokens[-1] == stop_at
    assert stopped.sequences[0].stop_reason == "stop"
    assert "ready in" in capsys.readouterr().err
    with pytest.raises(ProcessLookupError):
        os.killpg(pid, 0)
