"""The bf16 engine: frozen base weights cast once (autocast's own numbers), attention in fp32 on a
CPU (the stock dtype elsewhere), and sampled logprobs that still match a full forward pass."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from tinker import types

from kitchen.adapters.local.model.attention import NAME as ENGINE_ATTENTION
from kitchen.adapters.local.model.host import ModelHost, cast_frozen_linears, load_host
from kitchen.adapters.local.model.lora import LoraSpec, adapter_parameters, peft_config
from kitchen.adapters.local.model.settings import EngineSettings
from kitchen.ports import BackendSettings
from tests.helpers import engine_device, engine_generator, local_backend

from .conftest import TINY


def _host(tmp_path: Path, dtype: str) -> ModelHost:
    settings = EngineSettings.from_backend_settings(
        BackendSettings(log_dir=tmp_path, dtype=dtype, device=engine_device())
    )
    return load_host(TINY, settings)


def test_cast_copies_give_autocasts_numbers_and_keep_fp32_masters(tmp_path: Path) -> None:
    plain, cast = _host(tmp_path, "bfloat16"), _host(tmp_path, "bfloat16")
    linears = sum(type(m) is torch.nn.Linear for m in cast.base.modules())
    assert cast_frozen_linears(cast.base, torch.bfloat16) == linears > 0
    spec = LoraSpec(rank=4)
    for host in (plain, cast):
        host.add_adapter("a", peft_config(host.base, spec), seed=3)
        for p in adapter_parameters(host.model, "a").values():
            assert p.dtype == torch.float32  # the adapters train in fp32 whatever the copies are
            with torch.no_grad():
                p.add_(0.01)  # B starts at 0: make the adapter count
    tokens = torch.tensor([[1, 5, 9, 14, 3, 7, 2, 11]], device=engine_device())
    outs = []
    for host in (plain, cast):
        with host.use("a") as model, torch.no_grad():
            outs.append(model(input_ids=tokens).logits)
    torch.testing.assert_close(outs[0], outs[1], rtol=0, atol=0)
    # fp32 weights still serve a call without autocast, and the tied embedding reads them.
    assert all(p.dtype == torch.float32 for p in cast.base.parameters())
    with torch.no_grad():
        fp32 = cast.model(input_ids=tokens).logits
    assert fp32.dtype == torch.float32
    assert not torch.equal(fp32, outs[1].float())  # it really ran in another precision


def test_trainable_linears_are_left_alone(tmp_path: Path) -> None:
    host = _host(tmp_path, "bfloat16")
    host.base.requires_grad_(True)
    assert cast_frozen_linears(host.base, torch.bfloat16) == 0


@pytest.fixture(scope="module")
def bf16_backend(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    with local_backend(tmp_path_factory.mktemp("bf16"), "bfloat16") as engine:
        yield engine


def test_bf16_samples_score_like_a_full_forward_with_fp32_attention_on_a_cpu(
    bf16_backend: Any,
) -> None:
    sampler = bf16_backend.create_sampling_client(base_model=TINY)
    (host,) = bf16_backend.hosts()
    # The engine's SDPA (attention.py): in fp32 on a CPU, in autocast's dtype on accelerators.
    assert host.base.config._attn_implementation == ENGINE_ATTENTION
    params = types.SamplingParams(max_tokens=12, seed=5, stop=[])
    prompts = [[5, 17, 42], [8, 9, 10, 11, 12, 13, 14, 15, 16]]  # two lengths: a padded batch
    futures = [sampler.sample(types.ModelInput.from_ints(p), 3, params) for p in prompts]
    for prompt, future in zip(prompts, futures, strict=True):
        for seq in future.result().sequences:
            full = sampler.compute_logprobs(types.ModelInput.from_ints(prompt + seq.tokens))
            expected = np.asarray(full.result()[len(prompt) :], dtype=np.float64)
            # Equal here (the tiny model's matmuls have one accumulation block); bf16 kernels that
            # split the sum differently for other batch shapes may move the last bits.
            np.testing.assert_allclose(seq.logprobs, expected, atol=1e-3)


def test_a_bf16_lora_snapshot_samples_with_the_adapter_merged(bf16_backend: Any) -> None:
    """Under autocast a snapshot decodes with W + delta merged into one bf16 copy (host.py): its
    logprobs are as close to the fp32 base + adapter as the unmerged bf16 adapter's, and far from
    the base's."""
    client = bf16_backend.create_lora_training_client(TINY, rank=4, seed=1)
    generator = engine_generator(0)
    for p in adapter_parameters(client.host.model, client.adapter).values():
        p.data.normal_(0.0, 0.1, generator=generator)  # B = 0 would merge nothing
    sampler = client.save_weights_and_get_sampling_client("merged")
    prompt = [5, 17, 42, 99, 7]
    params = types.SamplingParams(max_tokens=10, seed=2, stop=[])
    sample = sampler.sample(types.ModelInput.from_ints(prompt), 1, params).result().sequences[0]
    tokens = prompt + list(sample.tokens)
    merged = np.asarray(sampler.compute_logprobs(types.ModelInput.from_ints(tokens)).result()[1:])
    np.testing.assert_allclose(sample.logprobs, merged[len(prompt) - 1 :], atol=1e-3)

    def logprobs(adapter: str | None, autocast: bool) -> Any:
        with (
            client.host.use(adapter) as model,
            torch.no_grad(),
            torch.autocast(client.host.device.type, dtype=torch.bfloat16, enabled=autocast),
        ):
            ids = torch.tensor([tokens], device=engine_device())
            logits = model(input_ids=ids).logits[0, :-1].float()
        targets = ids[0, 1:, None]
        return torch.log_softmax(logits, -1).gather(-1, targets)[:, 0].cpu().numpy()

    truth, unmerged, base = bf16_backend.compute.run(
        lambda: (
            logprobs(client.adapter, False),
            logprobs(client.adapter, True),
            logprobs(None, False),
        )
    )
    # One scoring pass of a snapshot never sampled builds no merge: it runs the adapter unmerged.
    other = client.save_weights_and_get_sampling_client("same-weights")
    scored = np.asarray(other.compute_logprobs(types.ModelInput.from_ints(tokens)).result()[1:])
    np.testing.assert_allclose(scored, unmerged, atol=1e-6)
    assert np.abs(merged - unmerged).max() > 1e-4  # the two paths really differ
    merged_error, unmerged_error = np.abs(merged - truth).mean(), np.abs(unmerged - truth).mean()
    assert merged_error < 2 * unmerged_error + 1e-3
    assert merged_error < 0.05 * np.abs(base - truth).mean()
