"""A 4-bit base under LoRA (`--base-quantization nf4`): LoRA trains on the quantized base, sampling
and compute_logprobs run on that same base, export merges into its dequantized weights, and where
bitsandbytes is missing or cannot run on the device, or the combination cannot work, the engine
refuses in one line."""

from __future__ import annotations

import sys
import types as pytypes
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from tinker import types
from typer.testing import CliRunner

from kitchen.adapters.local import create_local_backend
from kitchen.adapters.local.model import quantization
from kitchen.adapters.local.model.quantization import check_device
from kitchen.adapters.local.model.settings import EngineSettings
from kitchen.adapters.samplers import remote_samplers
from kitchen.engine.errors import ConfigError
from kitchen.ports import BackendSettings
from tests.helpers import chat_files, engine_device, local_backend

from .conftest import TEXTS, TINY, sft_datum
from .test_training import lora_weights, same


def nf4_unsupported() -> str | None:
    """Why this machine cannot hold a 4-bit base (the engine's own refusal), or None."""
    try:
        check_device(engine_device())
    except ConfigError as e:
        return str(e)
    return None


needs_nf4 = pytest.mark.skipif(nf4_unsupported() is not None, reason=str(nf4_unsupported()))


def nf4_backend(log_dir: Path, dtype: str = "float32") -> Any:
    return create_local_backend(
        BackendSettings(
            log_dir=log_dir,
            seed=0,
            dtype=dtype,
            device=engine_device(),
            extra={"base_quantization": "nf4"},
        )
    )


@pytest.fixture(scope="module")
def nf4(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    if (reason := nf4_unsupported()) is not None:
        pytest.skip(reason)
    engine = nf4_backend(tmp_path_factory.mktemp("nf4"))
    yield engine
    engine.close()


def train(client: Any, steps: int, learning_rate: float = 5e-3) -> list[float]:
    batch = [sft_datum(client.get_tokenizer(), t) for t in TEXTS]
    losses = []
    for _ in range(steps):
        fb = client.forward_backward(batch, "cross_entropy")
        client.optim_step(types.AdamParams(learning_rate=learning_rate))
        losses.append(fb.result().metrics["loss:sum"])
    return losses


@needs_nf4
def test_lora_trains_on_a_4bit_base(nf4: Any) -> None:
    import bitsandbytes as bnb

    client = nf4.create_lora_training_client(TINY, rank=8)
    base = client.host.base
    assert client.host.quantization == "nf4"
    quantized = [m for m in base.modules() if isinstance(m, bnb.nn.Linear4bit)]
    assert len(quantized) == 4 * 7  # every attention and MLP projection of the 4 decoder layers
    assert all(m.weight.dtype == torch.uint8 and not m.weight.requires_grad for m in quantized)
    before = lora_weights(client)
    losses = train(client, 8)
    assert not same(before, lora_weights(client))
    assert losses[-1] < 0.6 * losses[0] and all(np.isfinite(losses))
    client.close()


@needs_nf4
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_a_4bit_layer_computes_in_the_dtype_a_full_precision_one_does(tmp_path: Path, dtype: str):
    """Under bf16 autocast a Linear takes and returns bf16. A 4-bit layer returning its fp32 input's
    dtype made every tensor after it fp32: on an H200 a step's peak was 20.65 GB, not 14.37."""
    import bitsandbytes as bnb

    engine = nf4_backend(tmp_path, dtype)
    try:
        client = engine.create_lora_training_client(TINY, rank=8)
        layers = [m for m in client.host.base.modules() if isinstance(m, bnb.nn.Linear4bit)]
        seen: list[tuple[torch.dtype, torch.dtype]] = []
        hooks = [
            m.register_forward_hook(lambda m, args, out: seen.append((m.compute_dtype, out.dtype)))
            for m in layers
        ]
        train(client, 1)
        for hook in hooks:
            hook.remove()
        assert len(seen) >= len(layers)
        assert set(seen) == {(getattr(torch, dtype), getattr(torch, dtype))}
    finally:
        engine.close()


@needs_nf4
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_samples_and_compute_logprobs_agree_on_the_4bit_base(tmp_path: Path, dtype: str) -> None:
    """Under bf16 too, where a full-precision base would sample from merged weights: a 4-bit one
    samples with the adapter unmerged, the same weights compute_logprobs scores with."""
    engine = nf4_backend(tmp_path, dtype)
    try:
        client = engine.create_lora_training_client(TINY, rank=8)
        base_sampler = engine.create_sampling_client(base_model=TINY)
        assert base_sampler.host is client.host  # one 4-bit copy for training and sampling
        train(client, 5, learning_rate=1e-2)
        sampler = client.save_weights_and_get_sampling_client()
        prompt = types.ModelInput.from_ints([5, 17, 42, 99, 7, 300, 12])
        before = np.asarray(sampler.compute_logprobs(prompt).result()[1:])
        params = types.SamplingParams(max_tokens=12, seed=3, stop=[], temperature=1.0)
        response = sampler.sample(prompt, 4, params).result()
        tolerance = 1e-4 if dtype == "float32" else 2e-2
        for seq in response.sequences:
            full = types.ModelInput.from_ints(prompt.to_ints() + seq.tokens)
            scored = sampler.compute_logprobs(full).result()[prompt.length :]
            np.testing.assert_allclose(seq.logprobs, scored, atol=tolerance)
        # Sampling left the weights as they were, and they are the trained adapter's.
        after = np.asarray(sampler.compute_logprobs(prompt).result()[1:])
        np.testing.assert_allclose(after, before, atol=1e-6)
        untrained = np.asarray(base_sampler.compute_logprobs(prompt).result()[1:])
        assert np.abs(before - untrained).max() > 1e-2
    finally:
        engine.close()


@needs_nf4
def test_export_merges_into_the_dequantized_base(nf4: Any, tmp_path: Path) -> None:
    from transformers import AutoModelForCausalLM

    from kitchen.adapters.local.clients.export import export_checkpoint

    client = nf4.create_lora_training_client(TINY, rank=8)
    train(client, 3, learning_rate=1e-2)
    folder = client.save_weights_for_sampler("nf4-merge").result().path
    export_checkpoint(folder, tmp_path / "out", merge=True)
    model = AutoModelForCausalLM.from_pretrained(tmp_path / "out", dtype="float32")
    assert not any("4bit" in type(m).__name__ for m in model.modules())
    assert getattr(model.config, "quantization_config", None) is None
    tokens = client.get_tokenizer().encode(TEXTS[1])
    # An engine without --base-quantization samples the checkpoint on the base it trained on.
    with local_backend(tmp_path / "plain") as plain:
        sampler = plain.create_sampling_client(model_path=folder)
        assert sampler.host.quantization == "nf4"
        expected = np.asarray(
            sampler.compute_logprobs(types.ModelInput.from_ints(tokens)).result()[1:]
        )
    ids = torch.tensor([tokens], device="cpu")  # transformers loads the export on the CPU
    with torch.inference_mode():
        logprobs = torch.log_softmax(model(input_ids=ids).logits[0, :-1].float(), dim=-1)
    exported = logprobs.gather(-1, ids[0, 1:, None]).squeeze(-1).numpy()
    # Merged into the original fp32 weights instead, the model would be off by ~0.1 (measured).
    assert np.abs(exported - expected).max() < 1e-4
    client.close()


def test_a_missing_bitsandbytes_is_refused_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "bitsandbytes", None)  # import fails as if not installed
    # ...and this mark is not the engine's own hold-back, which a 4-bit backend would lift.
    monkeypatch.setattr(quantization, "_held_back", False)
    with pytest.raises(ConfigError) as refused:
        nf4_backend(Path("unused"))
    message = str(refused.value)
    assert "\n" not in message
    assert "needs bitsandbytes, which is not installed" in message
    assert "kitchen[qlora]" in message


def test_a_device_bitsandbytes_cannot_run_is_refused_in_one_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class NoKernel(torch.nn.Module):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__()

        def to(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError("no 4-bit kernel for this device\nsecond line")

    fake = pytypes.ModuleType("bitsandbytes")
    fake.__version__ = "0.0-test"  # type: ignore[attr-defined]
    fake.nn = pytypes.SimpleNamespace(Linear4bit=NoKernel)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "bitsandbytes", fake)
    with pytest.raises(ConfigError) as refused:
        check_device("cpu")
    assert str(refused.value) == (
        "--base-quantization nf4: bitsandbytes 0.0-test cannot run 4-bit layers on 'cpu' "
        "(no 4-bit kernel for this device); use --base-quantization none"
    )


@needs_nf4
def test_full_fine_tuning_of_a_4bit_base_is_refused(nf4: Any) -> None:
    with pytest.raises(ConfigError, match=r"full fine-tuning \(LoRA rank 0\) cannot train a 4-bit"):
        nf4.create_lora_training_client(TINY, rank=0)


def test_several_ranks_on_a_4bit_base_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    from kitchen.adapters.local import backend

    monkeypatch.setattr(backend, "executor", lambda: pytypes.SimpleNamespace(size=2))  # --nproc 2
    with pytest.raises(ConfigError, match="does not run with --nproc > 1 yet"):
        nf4_backend(Path("unused"))


def test_a_vllm_sampler_on_a_4bit_base_is_refused() -> None:
    extra = {"base_quantization": "nf4", "sampler": "vllm"}
    with pytest.raises(ConfigError, match="needs --sampler local: vllm would sample from its own"):
        create_local_backend(BackendSettings(device="cpu", extra=extra), remote_samplers(extra))


def test_settings_take_the_option_and_its_env_var(monkeypatch: pytest.MonkeyPatch) -> None:
    def engine(**extra: Any) -> EngineSettings:
        return EngineSettings.from_backend_settings(BackendSettings(device="cpu", extra=extra))

    assert engine().base_quantization == "none"
    assert engine(base_quantization="NF4").base_quantization == "nf4"
    monkeypatch.setenv("KITCHEN_BASE_QUANTIZATION", "nf4")
    assert engine().base_quantization == "nf4"
    with pytest.raises(ConfigError, match="base_quantization='int3' is not one of none, nf4"):
        engine(base_quantization="int3")


@needs_nf4
def test_kitchen_serve_hands_the_option_to_the_engine(tmp_path: Path) -> None:
    from kitchen.serve import ServeSettings
    from kitchen.serve.service import KitchenService

    service = KitchenService(
        ServeSettings(checkpoint_dir=tmp_path, device=engine_device(), base_quantization="nf4")
    )
    try:
        assert service.backend.settings.base_quantization == "nf4"
    finally:
        service.backend.close()


def test_kitchen_run_trains_on_a_4bit_base_or_refuses_in_one_line(tmp_path: Path) -> None:
    from kitchen.app.cli import app

    data, _ = chat_files(tmp_path, n=8)
    args = ["run", "sl_basic", "-m", TINY, "-d", data, "-b", "4", "--max-steps", "2"]
    args += ["--base-quantization", "nf4", "--no-progress", "--no-register"]
    args += ["--test-dataset", data, "--test-split", "train", "--num-samples-to-show", "1"]
    args += ["--sample-max-tokens", "8", "--log-dir", str(tmp_path / "run")]
    result = CliRunner().invoke(app, args)
    if (reason := nf4_unsupported()) is not None:
        assert result.exit_code == 2 and f"error: {reason}" in result.output
        return
    assert result.exit_code == 0, result.output
    assert (tmp_path / "run" / "checkpoints").is_dir()
