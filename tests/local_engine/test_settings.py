"""Engine settings: auto device/dtype, checkpoint folder, thread count, refused values."""

from __future__ import annotations

from pathlib import Path

import pytest

from kitchen.adapters.local.settings import SMALL_MODEL_PARAMS, EngineSettings, choose_num_threads
from kitchen.engine.errors import ConfigError
from kitchen.ports import BackendSettings


def test_auto_is_fp32_on_cpu_and_checkpoints_go_under_the_run(tmp_path: Path) -> None:
    settings = EngineSettings.from_backend_settings(BackendSettings(log_dir=tmp_path, device="cpu"))
    assert (settings.device, settings.dtype_name) == ("cpu", "float32")
    assert settings.checkpoint_root == (tmp_path / "checkpoints").resolve()
    bf16 = EngineSettings.from_backend_settings(BackendSettings(device="cpu", dtype="bf16"))
    assert bf16.dtype_name == "bfloat16"
    assert bf16.checkpoint_root.is_dir()  # a temp folder when there is no run directory


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
    ],
)
def test_bad_settings_are_refused(settings: BackendSettings, fragment: str) -> None:
    with pytest.raises(ConfigError, match=fragment):
        EngineSettings.from_backend_settings(settings)
