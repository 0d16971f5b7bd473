"""Engine settings: auto device/dtype, checkpoint folder, thread count, attention kernels, refused
values."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from kitchen.adapters.local.model import settings as settings_module
from kitchen.adapters.local.model.settings import (
    SMALL_MODEL_PARAMS,
    EngineSettings,
    choose_num_threads,
    cpu_has_native_bf16,
)
from kitchen.engine.errors import ConfigError
from kitchen.ports import BackendSettings


def test_auto_is_fp32_on_cpu_without_bf16_units_and_checkpoints_go_under_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(settings_module, "cpu_has_native_bf16", lambda: False)
    settings = EngineSettings.from_backend_settings(BackendSettings(log_dir=tmp_path, device="cpu"))
    assert (settings.device, settings.dtype_name) == ("cpu", "float32")
    assert settings.autocast_dtype is None
    assert settings.checkpoint_root == (tmp_path / "checkpoints").resolve()
    bf16 = EngineSettings.from_backend_settings(BackendSettings(device="cpu", dtype="bf16"))
    assert bf16.dtype_name == "bfloat16"
    assert bf16.checkpoint_root.is_dir()  # a temp folder when there is no run directory


@pytest.mark.parametrize(
    ("flags", "native"),
    [
        ("fpu sse avx2 avx512f avx512_bf16 avx512_vnni", True),
        ("fpu sse avx2 amx_bf16 amx_tile", True),
        ("fpu sse avx2 avx512f avx512_vnni", False),
    ],
)
def test_native_bf16_is_read_from_cpu_flags(tmp_path: Path, flags: str, native: bool) -> None:
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(f"processor\t: 0\nmodel name\t: x\nflags\t\t: {flags}\n")
    assert cpu_has_native_bf16(cpuinfo) is native
    assert cpu_has_native_bf16(tmp_path / "missing") is False


@pytest.mark.parametrize(("native", "expected"), [(True, "bfloat16"), (False, "float32")])
def test_auto_follows_the_cpu_and_dtype_overrides_it(
    monkeypatch: pytest.MonkeyPatch, native: bool, expected: str
) -> None:
    monkeypatch.setattr(settings_module, "cpu_has_native_bf16", lambda: native)
    auto = EngineSettings.from_backend_settings(BackendSettings(device="cpu"))
    assert auto.dtype_name == expected
    for given, name in [("fp32", "float32"), ("bf16", "bfloat16")]:
        chosen = EngineSettings.from_backend_settings(BackendSettings(device="cpu", dtype=given))
        assert chosen.dtype_name == name


def test_bf16_runs_as_autocast_over_fp32_weights(tmp_path: Path) -> None:
    from kitchen.adapters.local import create_local_backend

    engine = create_local_backend(BackendSettings(device="cpu", dtype="bf16", log_dir=tmp_path))
    try:
        client = engine.create_lora_training_client("kitchen/tiny-llama", rank=4)
        assert (engine.dtype_name, client.dtype_name) == ("bfloat16", "bfloat16")
        assert {p.dtype for p in client.host.base.parameters()} == {torch.float32}
        tokens = client.get_tokenizer().encode("a b c d e", add_special_tokens=False)
        with client.host.use(client.adapter) as model:
            logits = model(input_ids=torch.tensor([tokens], device="cpu")).logits
        assert logits.dtype == torch.bfloat16
    finally:
        engine.close()


def test_small_models_run_single_threaded_unless_configured() -> None:
    auto = EngineSettings.from_backend_settings(BackendSettings(device="cpu"))
    assert choose_num_threads(auto, SMALL_MODEL_PARAMS - 1) == 1
    assert choose_num_threads(auto, SMALL_MODEL_PARAMS) >= 1
    fixed = EngineSettings.from_backend_settings(
        BackendSettings(device="cpu", extra={"num_threads": 3})
    )
    assert choose_num_threads(fixed, 10) == 3


@pytest.mark.parametrize(
    ("settings", "fragment"),
    [
        (BackendSettings(device="tpu"), "not supported by the local engine"),
        (BackendSettings(device="cpu", dtype="int8"), "dtype 'int8'"),
        (BackendSettings(device="cpu", extra={"num_threads": 0}), "num_threads=0"),
        (
            BackendSettings(device="cpu", extra={"microbatch_tokens": "many"}),
            "microbatch_tokens='many'",
        ),
        (
            BackendSettings(device="cpu", extra={"cudnn_attention": "maybe"}),
            "cudnn_attention='maybe' is not a boolean",
        ),
    ],
)
def test_bad_settings_are_refused(settings: BackendSettings, fragment: str) -> None:
    with pytest.raises(ConfigError, match=fragment):
        EngineSettings.from_backend_settings(settings)


def test_cuda_attention_leaves_out_cudnn_while_the_engine_computes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """cuDNN's attention builds a graph per new shape (attention.py); the engine's passes change
    shape on nearly every call, so on CUDA they run flash / efficient SDPA unless asked."""
    from torch.nn.attention import SDPBackend

    from kitchen.adapters.local.model.attention import sdpa_backends
    from kitchen.adapters.local.model.host import load_host

    cuda = sdpa_backends("cuda", cudnn=False)
    assert cuda is not None and cuda[0] == SDPBackend.FLASH_ATTENTION
    assert SDPBackend.CUDNN_ATTENTION not in cuda
    assert sdpa_backends("cuda:1", cudnn=True) is None  # torch's own choice when asked
    assert sdpa_backends("cpu", cudnn=False) is None
    cpu = EngineSettings.from_backend_settings(BackendSettings(device="cpu", log_dir=tmp_path))
    assert not cpu.cudnn_attention
    monkeypatch.setenv("KITCHEN_CUDNN_ATTENTION", "1")
    assert EngineSettings.from_backend_settings(BackendSettings(device="cpu")).cudnn_attention
    # A host holds its backends only while it computes: torch keeps the choice process-wide.
    host = load_host("kitchen/tiny-llama", cpu)
    assert host.attention is None
    host.attention = cuda
    assert torch.backends.cuda.cudnn_sdp_enabled()
    with host.use(None):
        assert not torch.backends.cuda.cudnn_sdp_enabled()
        assert torch.backends.cuda.flash_sdp_enabled()
    assert torch.backends.cuda.cudnn_sdp_enabled()
