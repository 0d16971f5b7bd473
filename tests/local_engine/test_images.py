"""The local engine trains and scores model inputs with image chunks on the tiny Qwen3-VL."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tinker import types

from kitchen.engine.errors import BackendError
from tests.helpers import TINY_VLM as VLM
from tests.helpers import picture, refused_images
from train_core.renderers import get_renderer
from train_core.supervised.datum import datum_from_model_input_weights


def _renderer(client: Any) -> Any:
    from kitchen.adapters.local.model.images import vision_of

    vision = vision_of(client.host.base)
    assert vision is not None
    return get_renderer("qwen3_vl_instruct", client.get_tokenizer(), vision.processor)


def _example(client: Any, color: tuple[int, int, int], answer: str, size=(64, 48)) -> types.Datum:
    from PIL import Image

    image = Image.open(io.BytesIO(picture(color, size)))
    messages = [
        {
            "role": "user",
            "content": [{"type": "image", "image": image}, {"type": "text", "text": "Colour?"}],
        },
        {"role": "assistant", "content": answer},
    ]
    return datum_from_model_input_weights(*_renderer(client).build_supervised_example(messages))


def _with_image(datum: types.Datum, data: bytes, fmt: str = "png") -> types.Datum:
    chunks = list(datum.model_input.chunks)
    at = next(i for i, c in enumerate(chunks) if c.type == "image")
    chunks[at] = types.ImageChunk(data=data, format=fmt, expected_tokens=chunks[at].length)  # type: ignore[arg-type]
    return types.Datum(
        model_input=types.ModelInput(chunks=chunks), loss_fn_inputs=datum.loss_fn_inputs
    )


def _logprobs(out: types.ForwardBackwardOutput) -> list[np.ndarray]:
    return [o["logprobs"].to_numpy() for o in out.loss_fn_outputs]


@pytest.fixture(scope="module")
def client(backend: Any) -> Any:
    return backend.create_lora_training_client(VLM, rank=4)


def test_the_image_changes_the_logprobs_after_it(client: Any) -> None:
    red = _example(client, (255, 0, 0), "red")
    green = _with_image(red, picture((0, 255, 0)))
    lp_red, lp_green = _logprobs(client.forward([red, green], "cross_entropy").result())
    first_image = next(i for i, c in enumerate(red.model_input.chunks) if c.type == "image")
    before = sum(c.length for c in red.model_input.chunks[:first_image])
    # Causal: positions before the image see the same tokens; after it, a different picture.
    np.testing.assert_array_equal(lp_red[: before - 1], lp_green[: before - 1])
    assert np.abs(lp_red[before + 4 :] - lp_green[before + 4 :]).max() > 1e-4


def test_an_image_pointer_to_a_local_file_equals_its_bytes(client: Any, tmp_path: Path) -> None:
    red = _example(client, (255, 0, 0), "red")
    image = next(c for c in red.model_input.chunks if isinstance(c, types.ImageChunk))
    path = tmp_path / "red.jpeg"
    path.write_bytes(image.data)
    chunks = [
        types.ImageAssetPointerChunk(format="jpeg", location=str(path), expected_tokens=c.length)
        if c.type == "image"
        else c
        for c in red.model_input.chunks
    ]
    pointer = types.Datum(
        model_input=types.ModelInput(chunks=chunks), loss_fn_inputs=red.loss_fn_inputs
    )
    a, b = _logprobs(client.forward([red, pointer], "cross_entropy").result())
    np.testing.assert_allclose(a, b, atol=1e-6)


def test_micro_batches_and_mixed_text_rows_give_the_same_logprobs(backend: Any) -> None:
    client = backend.create_lora_training_client(VLM, rank=4)
    data = [
        _example(client, (255, 0, 0), "red"),
        _example(client, (0, 0, 255), "blue", size=(96, 64)),
        _example(client, (0, 255, 0), "a green one"),
    ]
    tokens = client.get_tokenizer().encode("just text, no image", add_special_tokens=False)
    text = types.Datum(
        model_input=types.ModelInput.from_ints(tokens[:-1]),
        loss_fn_inputs={
            "target_tokens": np.asarray(tokens[1:], dtype=np.int64),
            "weights": np.ones(len(tokens) - 1, dtype=np.float32),
        },
    )
    together = _logprobs(client.forward([*data, text], "cross_entropy").result())
    client.microbatch_tokens = 24  # one row per pass
    apart = _logprobs(client.forward([*data, text], "cross_entropy").result())
    for a, b in zip(together, apart, strict=True):
        np.testing.assert_allclose(a, b, atol=2e-5)


def test_cross_entropy_training_on_images_lowers_the_loss_and_keeps_the_vision_tower(
    backend: Any,
) -> None:
    client = backend.create_lora_training_client(VLM, rank=4)
    data = [_example(client, (255, 0, 0), "red"), _example(client, (0, 0, 255), "blue")]
    vision_before = {
        n: p.detach().clone() for n, p in client.host.base.model.visual.named_parameters()
    }
    losses = []
    for _ in range(4):
        out = client.forward_backward(data, "cross_entropy").result()
        client.optim_step(types.AdamParams(learning_rate=1e-2)).result()
        losses.append(out.metrics["loss:sum"])
    assert losses[-1] < 0.8 * losses[0], losses
    adapted = [
        n
        for n, _ in client.host.model.named_parameters()
        if ".lora_A." in n and client.adapter in n
    ]
    assert adapted and not any(".visual." in n for n in adapted)
    for n, p in client.host.base.model.visual.named_parameters():
        assert ".lora_" in n or bool((p == vision_before[n]).all()), n


def test_train_vision_adapts_the_vision_tower(backend: Any) -> None:
    client = backend.create_lora_training_client(VLM, rank=4, train_vision=True)
    adapted = [
        n
        for n, _ in client.host.model.named_parameters()
        if ".lora_A." in n and client.adapter in n
    ]
    vision = [n for n in adapted if ".visual." in n]
    assert vision and len(vision) < len(adapted)
    data = [_example(client, (255, 0, 0), "red")]
    client.forward_backward(data, "cross_entropy").result()
    params = dict(client.host.model.named_parameters())
    grads = [params[n.replace("lora_A", "lora_B")].grad for n in vision]
    assert any(g is not None and float(g.abs().sum()) > 0 for g in grads)


@pytest.mark.parametrize("loss_fn", ["importance_sampling", "ppo", "cispo", "dro", "gspo"])
def test_every_policy_loss_trains_on_images(backend: Any, loss_fn: str) -> None:
    from kitchen.adapters.local.model.lora import adapter_parameters

    client = backend.create_lora_training_client(VLM, rank=4)
    datum = _example(client, (255, 0, 0), "red")
    n = len(datum.loss_fn_inputs["target_tokens"].to_numpy())
    inputs: dict[str, Any] = {
        "target_tokens": datum.loss_fn_inputs["target_tokens"],
        "logprobs": np.full(n, -2.0, dtype=np.float32),
        "advantages": np.linspace(-1, 1, n).astype(np.float32),
    }
    if loss_fn == "gspo":
        inputs["sequence_ratio_mask"] = np.ones(n, dtype=np.float32)
    rl = types.Datum(model_input=datum.model_input, loss_fn_inputs=inputs)
    out = client.forward_backward([rl], loss_fn).result()
    assert np.isfinite(out.metrics["loss:sum"])
    plain = client.forward([datum], "cross_entropy").result()
    np.testing.assert_allclose(_logprobs(out)[0], _logprobs(plain)[0], atol=1e-5)
    grads = [p.grad for p in adapter_parameters(client.host.model, client.adapter).values()]
    assert any(g is not None and float(g.abs().sum()) > 0 for g in grads)


def test_a_custom_loss_runs_with_images(client: Any) -> None:
    import torch

    datum = _example(client, (255, 0, 0), "red")

    def loss(data: list[types.Datum], logprobs: list[torch.Tensor]) -> tuple[torch.Tensor, dict]:
        return -logprobs[0].sum(), {}

    custom = client.forward_backward_custom([datum], loss).result()
    plain = client.forward([datum], "cross_entropy").result()
    np.testing.assert_allclose(_logprobs(custom)[0], _logprobs(plain)[0], atol=1e-5)


def test_save_and_load_state_with_images_gives_the_same_logprobs(backend: Any) -> None:
    client = backend.create_lora_training_client(VLM, rank=4)
    data = [_example(client, (255, 0, 0), "red")]
    client.forward_backward(data, "cross_entropy").result()
    client.optim_step(types.AdamParams(learning_rate=1e-2)).result()
    saved = _logprobs(client.forward(data, "cross_entropy").result())[0]
    path = client.save_state("vision").result().path
    again = backend.create_training_client_from_state(path)
    np.testing.assert_allclose(
        _logprobs(again.forward(data, "cross_entropy").result())[0], saved, atol=1e-6
    )


@pytest.mark.parametrize(("chunk", "message"), refused_images())
def test_an_image_the_model_cannot_take_is_refused_naming_the_datum(
    client: Any, chunk: Any, message: str
) -> None:
    ok = types.EncodedTextChunk(tokens=[5, 6])
    datum = types.Datum(
        model_input=types.ModelInput(chunks=[ok, chunk, ok]),
        loss_fn_inputs={"target_tokens": np.zeros(8, dtype=np.int64)},
    )
    with pytest.raises(BackendError, match=rf"datum 0: chunk 1 \(image.*{message}"):
        client.forward([datum], "cross_entropy").result()


def test_an_image_sent_to_a_text_model_is_refused(backend: Any) -> None:
    client = backend.create_lora_training_client("kitchen/tiny-qwen", rank=4)
    chunk = types.ImageChunk(data=picture((1, 2, 3)), format="png", expected_tokens=4)
    datum = types.Datum(
        model_input=types.ModelInput(chunks=[types.EncodedTextChunk(tokens=[5]), chunk]),
        loss_fn_inputs={"target_tokens": np.zeros(5, dtype=np.int64)},
    )
    with pytest.raises(BackendError, match=r"datum 0: chunk 1 is an image chunk, but .* text-only"):
        client.forward([datum], "cross_entropy").result()


def test_samples_from_an_image_prompt_score_the_same_by_compute_logprobs(backend: Any) -> None:
    """The decode loop's M-RoPE positions (prompt with an image, then sampled tokens, in a batch
    with a text prompt) agree with one forward pass over prompt + sample."""
    client = backend.create_lora_training_client(VLM, rank=4)
    datum = _example(client, (255, 0, 0), "red")
    client.forward_backward([datum], "cross_entropy").result()
    client.optim_step(types.AdamParams(learning_rate=1e-2)).result()
    sampler = client.save_weights_and_get_sampling_client()
    prompt = datum.model_input
    params = types.SamplingParams(max_tokens=6, temperature=1.0, seed=3)
    text_prompt = types.ModelInput.from_ints([5, 6, 7])
    image_future = sampler.sample(prompt, 2, params)
    text_future = sampler.sample(text_prompt, 1, params)
    text_future.result()
    for sequence in image_future.result().sequences:
        full = prompt.append(types.EncodedTextChunk(tokens=list(sequence.tokens)))
        scored = sampler.compute_logprobs(full).result()
        np.testing.assert_allclose(scored[-len(sequence.tokens) :], sequence.logprobs, atol=1e-4)
    other = _with_image(datum, picture((0, 255, 0))).model_input
    a = sampler.compute_logprobs(prompt).result()
    b = sampler.compute_logprobs(other).result()
    assert max(abs(x - y) for x, y in zip(a[-3:], b[-3:], strict=True)) > 1e-4


def test_an_image_over_the_size_limit_is_refused(
    client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kitchen.adapters.local.model import images

    monkeypatch.setattr(images, "MAX_IMAGE_PIXELS", 1000)
    datum = _with_image(_example(client, (255, 0, 0), "red"), picture((3, 1, 4)))
    with pytest.raises(BackendError, match="the image is 64x48 pixels; at most 1000"):
        client.forward([datum], "cross_entropy").result()
    monkeypatch.setattr(images, "MAX_IMAGE_BYTES", 100)
    with pytest.raises(BackendError, match="at most 100 are taken"):
        client.forward([datum], "cross_entropy").result()


def test_the_image_placeholder_is_never_sampled_and_refused_in_text(backend: Any) -> None:
    """A sampled image token would be taken for an image's place by the next forward: the sampler
    never picks one, even where the model's likeliest token is one, and a text chunk holding one
    is refused."""
    client = backend.create_lora_training_client(VLM, rank=4)
    pad = client.get_tokenizer().convert_tokens_to_ids("<|image_pad|>")
    datum = _example(client, (255, 0, 0), "red")
    targets = datum.loss_fn_inputs["target_tokens"].to_numpy().copy()
    weights = np.zeros(len(targets), dtype=np.float32)
    targets[-1], weights[-1] = pad, 1.0
    trained = types.Datum(
        model_input=datum.model_input,
        loss_fn_inputs={"target_tokens": targets, "weights": weights},
    )
    for _ in range(8):
        client.forward_backward([trained], "cross_entropy").result()
        client.optim_step(types.AdamParams(learning_rate=0.1)).result()
    assert _logprobs(client.forward([trained], "cross_entropy").result())[0][-1] > np.log(0.5)
    sampler = client.save_weights_and_get_sampling_client()
    prompt = datum.model_input.append(
        types.EncodedTextChunk(tokens=[int(datum.loss_fn_inputs["target_tokens"].to_numpy()[-1])])
    )
    greedy = types.SamplingParams(max_tokens=1, temperature=0.0)
    (sequence,) = sampler.sample(prompt, 1, greedy).result().sequences
    assert sequence.tokens[0] != pad
    scored = sampler.compute_logprobs(prompt.append_int(sequence.tokens[0])).result()
    assert scored[-1] == pytest.approx(sequence.logprobs[0], abs=1e-4)

    text = prompt.append_int(pad)
    with pytest.raises(BackendError, match=rf"chunk \d+ \(encoded_text\) holds token id {pad}"):
        sampler.compute_logprobs(text).result()
