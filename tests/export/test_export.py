"""An exported checkpoint loads in plain transformers / PEFT and gives the engine's logprobs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tinker import types

from kitchen.engine.errors import ConfigError
from tests.helpers import local_backend, smollm2_missing

TINY = "kitchen/tiny-llama"
SMOLLM2 = "HuggingFaceTB/SmolLM2-135M-Instruct"
TEXT = "The kitchen opens before sunrise, when the ovens are still cold."


@pytest.fixture(scope="module")
def backend(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    with local_backend(tmp_path_factory.mktemp("run")) as engine:
        yield engine


def trained_sampler_folder(backend: Any, rank: int, name: str, model: str = TINY) -> str:
    """A few SFT steps (large LR, so the weights move), saved as sampler weights."""
    client = backend.create_lora_training_client(model, rank=rank)
    tokens = client.get_tokenizer().encode(TEXT)
    datum = types.Datum(
        model_input=types.ModelInput.from_ints(tokens[:-1]),
        loss_fn_inputs={
            "target_tokens": np.asarray(tokens[1:], dtype=np.int64),
            "weights": np.ones(len(tokens) - 1, dtype=np.float32),
        },
    )
    for _ in range(3):
        client.forward_backward([datum], "cross_entropy").result()
        client.optim_step(types.AdamParams(learning_rate=1e-2)).result()
    return str(client.save_weights_for_sampler(name).result().path)


def engine_logprobs(
    backend: Any, model_path: str | None, tokens: list[int], model: str = TINY
) -> np.ndarray:
    if model_path is None:
        sampler = backend.create_sampling_client(base_model=model)
    else:
        sampler = backend.create_sampling_client(model_path=model_path)
    return np.asarray(sampler.compute_logprobs(types.ModelInput.from_ints(tokens)).result()[1:])


def hf_logprobs(model: Any, tokens: list[int]) -> np.ndarray:
    import torch

    ids = torch.tensor([tokens], device=model.device)  # plain transformers: the CPU
    with torch.inference_mode():
        logits = model(input_ids=ids).logits[0].float()
    lsm = torch.log_softmax(logits[:-1], dim=-1)
    return lsm.gather(-1, ids[0, 1:, None]).squeeze(-1).cpu().numpy()


@pytest.mark.parametrize(
    ("model_name", "rank", "template_marker"),
    [
        pytest.param(TINY, 4, "<|start_header_id|>", id="lora"),
        pytest.param(TINY, 0, "<|start_header_id|>", id="full"),
        # The real model: SmolLM2 ties lm_head to the embeddings, which the merge must untie.
        pytest.param(
            SMOLLM2,
            8,
            "<|im_start|>",
            id="smollm2-lora",
            marks=[
                pytest.mark.slow,
                pytest.mark.skipif(smollm2_missing() is not None, reason=str(smollm2_missing())),
            ],
        ),
    ],
)
def test_merged_export_loads_in_transformers_with_the_engines_logprobs(
    backend: Any, tmp_path: Path, model_name: str, rank: int, template_marker: str
) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from kitchen.adapters.local.clients.export import export_checkpoint

    name = f"merged-{rank}-{model_name.replace('/', '--')}"
    folder = trained_sampler_folder(backend, rank, name, model=model_name)
    export_checkpoint(folder, tmp_path / "out", merge=True)
    model = AutoModelForCausalLM.from_pretrained(tmp_path / "out", dtype="float32")
    tokenizer = AutoTokenizer.from_pretrained(tmp_path / "out")
    tokens = tokenizer.encode(TEXT)
    expected = engine_logprobs(backend, folder, tokens)
    trained = np.abs(expected - engine_logprobs(backend, None, tokens, model=model_name)).max()
    assert trained > 1e-2
    assert np.abs(hf_logprobs(model, tokens) - expected).max() < 1e-4
    assert template_marker in tokenizer.chat_template


def test_adapter_export_loads_with_peft(backend: Any, tmp_path: Path) -> None:
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    from kitchen.adapters.local.clients.export import export_checkpoint

    folder = trained_sampler_folder(backend, 4, "adapter")
    export_checkpoint(folder, tmp_path / "adapter", merge=False)
    base = AutoModelForCausalLM.from_pretrained(
        _adapter_base(tmp_path / "adapter"), dtype="float32"
    )
    model = PeftModel.from_pretrained(base, tmp_path / "adapter")
    tokens = backend.create_sampling_client(model_path=folder).get_tokenizer().encode(TEXT)
    expected = engine_logprobs(backend, folder, tokens)
    assert np.abs(hf_logprobs(model, tokens) - expected).max() < 1e-4


def test_full_weights_have_no_adapter_form(backend: Any, tmp_path: Path) -> None:
    from kitchen.adapters.local.clients.export import export_checkpoint

    folder = trained_sampler_folder(backend, 0, "full-adapter")
    with pytest.raises(ConfigError, match="pass --merge"):
        export_checkpoint(folder, tmp_path / "x", merge=False)


def _adapter_base(folder: Path) -> str:
    import json

    return str(json.loads((folder / "adapter_config.json").read_text())["base_model_name_or_path"])


def test_cli_writes_the_folder_and_explains_tinker_paths(backend: Any, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from kitchen.app.cli import app

    folder = trained_sampler_folder(backend, 0, "cli")
    runner = CliRunner()
    done = runner.invoke(app, ["export", folder, "--out", str(tmp_path / "m"), "--merge"])
    assert done.exit_code == 0, done.output
    assert (tmp_path / "m" / "config.json").is_file()
    refused = runner.invoke(app, ["export", "tinker://run/sampler_weights/x", "--out", "o"])
    assert refused.exit_code == 2
    assert "tinker checkpoint download" in refused.output


@pytest.mark.parametrize("train_vision", [False, True], ids=["language", "vision-too"])
def test_a_merged_vlm_loads_in_transformers_and_reads_images_as_the_engine_does(
    backend: Any, tmp_path: Path, train_vision: bool
) -> None:
    """The tiny Qwen3-VL trained on an image, exported merged: transformers' own processor inputs
    and forward (its own M-RoPE positions) give the engine's logprobs of the same image prompt."""
    import torch
    from transformers import AutoImageProcessor, AutoModelForImageTextToText

    from kitchen.adapters.local.clients.export import export_checkpoint
    from tests.helpers import TINY_VLM, engine_device, image_datum, picture

    client = backend.create_lora_training_client(TINY_VLM, rank=4, train_vision=train_vision)
    image = types.ImageChunk(data=picture((250, 30, 30)), format="png", expected_tokens=4)
    start, end, pad = 1090, 1091, 1092  # the tiny VLM's vision tokens
    head, tail = [1, 40, 50, 10, start], [end, 60, 61, 62, 63, 2]
    tokens = [*head, *[pad] * 4, *tail]
    targets = np.asarray(tokens[1:], dtype=np.int64)
    weights = np.asarray([0.0] * 8 + [1.0] * 6, dtype=np.float32)
    datum = image_datum(head, image, tail, targets, weights)
    for _ in range(3):
        client.forward_backward([datum], "cross_entropy").result()
        client.optim_step(types.AdamParams(learning_rate=5e-2)).result()
    folder = str(client.save_weights_for_sampler(f"vlm-{train_vision}").result().path)
    export_checkpoint(folder, tmp_path / "out", merge=True)

    prompt = types.ModelInput(
        chunks=[types.EncodedTextChunk(tokens=head), image, types.EncodedTextChunk(tokens=tail)]
    )
    expected = backend.create_sampling_client(model_path=folder).compute_logprobs(prompt).result()
    model = AutoModelForImageTextToText.from_pretrained(tmp_path / "out", dtype="float32")
    processor = AutoImageProcessor.from_pretrained(tmp_path / "out", backend="pil")
    import io

    from PIL import Image

    pixels = processor(
        images=[Image.open(io.BytesIO(image.data)).convert("RGB")], return_tensors="pt"
    )
    ids = torch.tensor([tokens], device="cpu")
    with torch.inference_mode():
        logits = model(
            input_ids=ids,
            pixel_values=pixels["pixel_values"],
            image_grid_thw=pixels["image_grid_thw"],
            mm_token_type_ids=(ids == pad).int(),
        ).logits[0]
    theirs = torch.log_softmax(logits[:-1], -1).gather(-1, ids[0, 1:, None]).squeeze(-1).numpy()
    # On CUDA the engine's kernels are not the CPU's (cuDNN may run the vision tower's patch
    # convolution in TF32): an H200 differed from the CPU reference by 4.6e-5 relative at most.
    rtol = 0.0 if engine_device() == "cpu" else 1e-4
    np.testing.assert_allclose(
        theirs, np.asarray(expected[1:], dtype=np.float32), atol=1e-4, rtol=rtol
    )
    base = backend.create_sampling_client(base_model=TINY_VLM).compute_logprobs(prompt).result()
    assert np.abs(np.asarray(base[1:]) - np.asarray(expected[1:])).max() > 1e-2
