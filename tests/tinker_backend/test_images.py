"""The official SDK sends images to `kitchen serve`: sampling, scoring and training take them, a bad
image is refused in one line naming the request, and two tenants share the server."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tinker
from tinker import types

from tests.helpers import TINY_VLM, picture, refused_images

from .conftest import TINY

PARAMS = types.SamplingParams(max_tokens=5, temperature=1.0, seed=11)


@pytest.fixture
def service(sdk_env: str) -> Any:
    client = tinker.ServiceClient()
    yield client
    client.close("success").result()


def _prompt(image: types.ModelInputChunk) -> types.ModelInput:
    """`<|im_start|>user\\n<|vision_start|>IMAGE<|vision_end|>Colour?` and the assistant header,
    as token ids of the tiny VLM's tokenizer (its vision tokens follow the 1090-token vocabulary)."""
    start, end = 1090, 1091
    return types.ModelInput(
        chunks=[
            types.EncodedTextChunk(tokens=[1, 40, 50, 10, start]),
            image,
            types.EncodedTextChunk(tokens=[end, 60, 61, 2, 10, 1, 70, 10]),
        ]
    )


def _next_token_datum(prompt: types.ModelInput) -> types.Datum:
    """`_prompt`'s tokens as a datum predicting each next token (the image's 4 positions hold
    its placeholder, 1092, as a target), every position weighted."""
    head, image, tail = prompt.chunks
    expanded = [*head.tokens, *[1092] * 4, *tail.tokens]  # type: ignore[union-attr]
    shifted = types.EncodedTextChunk(tokens=tail.tokens[:-1])  # type: ignore[union-attr]
    return types.Datum(
        model_input=types.ModelInput(chunks=[head, image, shifted]),
        loss_fn_inputs={
            "target_tokens": np.asarray(expanded[1:], dtype=np.int64),
            "weights": np.ones(len(expanded) - 1, dtype=np.float32),
        },
    )


def _png(color: tuple[int, int, int]) -> types.ImageChunk:
    return types.ImageChunk(data=picture(color), format="png", expected_tokens=4)


def test_sampling_and_scoring_take_images_and_local_image_files(
    service: Any, tmp_path: Path
) -> None:
    training = service.create_lora_training_client(base_model=TINY_VLM, rank=4).result()
    sampler = training.save_weights_and_get_sampling_client().result()
    red = _prompt(_png((255, 0, 0)))
    path = tmp_path / "red.png"
    path.write_bytes(picture((255, 0, 0)))
    pointer = _prompt(
        types.ImageAssetPointerChunk(format="png", location=str(path), expected_tokens=4)
    )
    sampled = sampler.sample(red, 2, PARAMS).result()
    from_file = sampler.sample(pointer, 2, PARAMS).result()
    assert [s.tokens for s in sampled.sequences] == [s.tokens for s in from_file.sequences]
    assert all(len(s.tokens) == 5 for s in sampled.sequences)

    # Scoring: compute_logprobs of the prompt equals the training forward of the same tokens.
    scored = sampler.compute_logprobs(red).result()
    assert len(scored) == red.length and scored[0] is None
    forward = training.forward([_next_token_datum(red)], "cross_entropy").result()
    lp = forward.loss_fn_outputs[0]["logprobs"].to_numpy()
    np.testing.assert_allclose(lp, np.asarray(scored[1:], dtype=np.float32), atol=1e-4)
    green = sampler.compute_logprobs(_prompt(_png((0, 255, 0)))).result()
    assert max(abs(a - b) for a, b in zip(scored[-7:], green[-7:], strict=True)) > 1e-4


# The jpeg-labelled png is left out: the sampling path decodes it by its bytes and takes it.
@pytest.mark.parametrize(
    ("chunk", "message"), [case for case in refused_images() if "jpeg" not in case[1]]
)
def test_a_bad_image_is_refused_in_one_line_and_the_session_goes_on(
    service: Any, chunk: Any, message: str
) -> None:
    training = service.create_lora_training_client(base_model=TINY_VLM, rank=4).result()
    sampler = training.save_weights_and_get_sampling_client().result()
    with pytest.raises(Exception, match=message) as refused:
        sampler.sample(_prompt(chunk), 1, PARAMS).result()
    assert "\n" not in str(refused.value).strip()
    assert len(sampler.sample(_prompt(_png((1, 2, 3))), 1, PARAMS).result().sequences) == 1


def test_an_image_sent_to_a_text_model_is_refused(service: Any) -> None:
    sampler = service.create_sampling_client(base_model=TINY).result()
    with pytest.raises(Exception, match="text-only"):
        sampler.sample(_prompt(_png((1, 2, 3))), 1, PARAMS).result()
    assert sampler.sample(types.ModelInput.from_ints([1, 2, 3]), 1, PARAMS).result().sequences


def test_training_on_images_through_the_sdk_lowers_the_loss(service: Any) -> None:
    training = service.create_lora_training_client(base_model=TINY_VLM, rank=4).result()
    prompt = _prompt(_png((255, 0, 0)))
    n = prompt.length
    datum = types.Datum(
        model_input=prompt,
        loss_fn_inputs={
            "target_tokens": np.full(n, 80, dtype=np.int64),
            "weights": np.asarray([0.0] * (n - 3) + [1.0] * 3, dtype=np.float32),
        },
    )
    losses = []
    for _ in range(3):
        out = training.forward_backward([datum], "cross_entropy").result()
        training.optim_step(types.AdamParams(learning_rate=5e-2)).result()
        losses.append(out.metrics["loss:sum"])
    assert losses[-1] < losses[0], losses


def test_two_tenants_an_image_model_and_a_text_model_get_what_each_gets_alone(
    sdk_env: str,
) -> None:
    def image_tenant() -> list[list[int]]:
        service = tinker.ServiceClient()
        sampler = service.create_sampling_client(base_model=TINY_VLM).result()
        out = sampler.sample(_prompt(_png((0, 0, 255))), 3, PARAMS).result()
        service.close("success").result()
        return [list(s.tokens) for s in out.sequences]

    def text_tenant() -> list[list[int]]:
        service = tinker.ServiceClient()
        sampler = service.create_sampling_client(base_model=TINY).result()
        out = sampler.sample(types.ModelInput.from_ints([1, 40, 50, 10]), 3, PARAMS).result()
        service.close("success").result()
        return [list(s.tokens) for s in out.sequences]

    alone = (image_tenant(), text_tenant())
    results: dict[str, list[list[int]]] = {}
    threads = [
        threading.Thread(target=lambda: results.__setitem__("image", image_tenant())),
        threading.Thread(target=lambda: results.__setitem__("text", text_tenant())),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert (results["image"], results["text"]) == alone


def test_the_wire_reads_image_chunks_and_refuses_an_unknown_format() -> None:
    from tinker.proto import tinker_public_pb2 as pb

    from kitchen.serve.wire import WireError, decode_forward_backward

    msg = pb.ForwardBackwardRequest(model_id="m", seq_id=1, loss_fn="cross_entropy")
    datum = msg.data.add()
    datum.model_input.add().encoded_text.tokens = np.asarray([1, 2], dtype=np.int32).tobytes()
    image = datum.model_input.add().image
    image.data, image.format, image.expected_tokens = picture((1, 2, 3)), "png", 4
    (decoded,) = decode_forward_backward(msg.SerializeToString()).data
    chunk = decoded.model_input.chunks[1]
    assert isinstance(chunk, types.ImageChunk)
    assert (chunk.format, chunk.expected_tokens, chunk.data) == ("png", 4, picture((1, 2, 3)))
    image.format = "gif"
    with pytest.raises(WireError, match=r"datum 0: chunk 1 \(image\): image format 'gif'"):
        decode_forward_backward(msg.SerializeToString())
