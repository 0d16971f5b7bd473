"""vlm_rl on the fake backend: prompts carry the picture, the reward names its colour."""

from __future__ import annotations

import asyncio

import pytest

from cookbook.envs.shapes import ImageClassEnv, named_classes
from cookbook.recipes.vlm_rl import VLMRL
from kitchen.adapters.datasets import HFDatasetStore
from kitchen.adapters.fake import FakeBackend
from kitchen.app.launch import run
from train_core.renderers import get_renderer

SMALL = {"no_register": True, "groups_per_batch": 2, "group_size": 2, "num_test_problems": 4}
CLASSES = ["blue", "green", "red", "yellow"]


def test_image_prompts_reach_the_sampler_and_answers_are_graded() -> None:
    fake = FakeBackend(responder=lambda _: "blue")
    cfg = {**SMALL, "eval_every": 2, "max_tokens": 8}
    result = run(VLMRL(), cfg, backend=fake, max_steps=3)
    assert result.steps == 3 and fake.unawaited == 0
    # 3 steps x 2 groups x 2 rollouts, and 4 held-out pictures at steps 0 and 2 and the end
    assert fake.images["sample"] == 3 * 2 * 2 + 3 * 4
    train = [m for m in result.metrics if "env/all/format" in m]
    assert len(train) == 3 and {m["env/all/format"] for m in train} == {1.0}  # one colour named


@pytest.mark.parametrize(
    ("answer", "reward"),
    [("blue", 1.0), ("It is blue.", 1.0), ("red", 0.0), ("blue or red", 0.9), ("no idea", -0.1)],
)
def test_the_reward_is_for_naming_the_right_class(answer: str, reward: float) -> None:
    fake = FakeBackend()
    renderer = get_renderer(
        "qwen3_vl_instruct", fake.tokenizer, image_processor=fake.image_processor
    )
    picture = HFDatasetStore().load("bundled:shapes", "test")[0]["image"]
    env = ImageClassEnv(picture, "blue", CLASSES, "What colour?", renderer)
    prompt, _ = asyncio.run(env.initial_observation())
    assert [c.type for c in prompt.chunks].count("image") == 1
    action = fake.tokenizer.encode(answer + "<|im_end|>")
    assert asyncio.run(env.step(action)).reward == pytest.approx(reward)


def test_an_answer_is_graded_by_the_first_class_word_it_names() -> None:
    assert named_classes("It is Red, not blue.", CLASSES) == ["red", "blue"]
    assert named_classes("reddish bluey", CLASSES) == []
