"""vlm_classifier end to end on the fake backend: images reach training and sampling, counted as
the engine counts them; only the answer trains; held-out accuracy reads the class after the
prefilled answer start, as tinker-cookbook's evaluator does."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from cookbook.recipes.vlm_classifier import VLMClassifier
from kitchen.adapters.datasets import HFDatasetStore
from kitchen.adapters.fake import FakeBackend
from kitchen.app.launch import run
from kitchen.engine.errors import ConfigError

SMALL = {
    "no_register": True,
    "batch_size": 8,
    "eval_every": 5,
    "n_eval": 20,
    "num_samples_to_show": 2,
}


def test_images_train_and_sample_and_accuracy_is_logged(tmp_path: Path) -> None:
    fake = FakeBackend(responder=lambda _: " red")  # the class after "The subject ... is:"
    result = run(VLMClassifier(), SMALL, backend=fake, log_dir=tmp_path / "run", max_steps=6)
    assert result.steps == 6 and fake.unawaited == 0
    assert set(fake.loss_fns) == {"cross_entropy"}
    assert fake.images["forward_backward"] == 6 * 8  # one picture per example
    # held-out accuracy at steps 0 and 5 and at the end, 20 pictures each, plus 2+2 samples shown
    assert fake.images["sample"] == 3 * 20 + 4
    evals = [m for m in result.metrics if "test/accuracy" in m]
    assert [m["step"] for m in evals] == [0, 5, 6]
    # "red" is right on exactly the red pictures among the first 20 held-out rows
    red = [r["label"] for r in HFDatasetStore().load("bundled:shapes", "test")[:20]].count("red")
    assert 0 < red < 20
    assert [m["test/accuracy"] for m in evals] == [pytest.approx(red / 20)] * 3
    samples = [json.loads(x) for x in (tmp_path / "run" / "samples.jsonl").read_text().splitlines()]
    assert samples[0]["after"] == " red"


def test_only_the_answer_carries_loss() -> None:
    fake = FakeBackend()
    seen = []
    client_cls = type(fake.create_lora_training_client("m"))
    original = client_cls.forward_backward

    def spy(self, data, loss_fn, loss_fn_config=None):  # type: ignore[no-untyped-def]
        seen.extend(data)
        return original(self, data, loss_fn, loss_fn_config)

    client_cls.forward_backward = spy
    try:
        run(VLMClassifier(), SMALL, backend=fake, max_steps=1)
    finally:
        client_cls.forward_backward = original
    datum = seen[0]
    weights = np.asarray(datum.loss_fn_inputs["weights"].to_numpy())
    targets = np.asarray(datum.loss_fn_inputs["target_tokens"].to_numpy())
    trained = fake.tokenizer.decode(
        [int(t) for t, w in zip(targets, weights, strict=True) if w > 0]
    )
    assert trained.startswith("The subject in this photo is: ")
    assert trained.endswith("\n<|im_end|>")
    kinds = [c.type for c in datum.model_input.chunks]
    assert kinds.count("image") == 1 and kinds[-1] == "encoded_text"


def test_a_model_without_an_image_processor_is_refused_before_any_step() -> None:
    fake = FakeBackend(image_processor=None)
    with pytest.raises(ConfigError, match="takes no images on the fake backend") as err:
        run(VLMClassifier(), SMALL, backend=fake, max_steps=1)
    assert "\n" not in str(err.value)
    assert "forward_backward" not in fake.calls
