import math

import pytest

from train_core.hyperparams import get_lr, model_family
from train_core.schedules import compute_schedule_lr_multiplier, lr_at


@pytest.mark.parametrize(
    ("schedule", "step", "expected"),
    [
        ("constant", 0, 1.0),
        ("constant", 99, 1.0),
        ("linear", 0, 1.0),
        ("linear", 50, 0.5),
        ("linear", 99, 0.01),
        ("cosine", 0, 1.0),
        ("cosine", 50, 0.5),
        ("cosine", 25, 0.5 * (1 + math.cos(math.pi / 4))),
    ],
)
def test_schedules_match_cookbook_multipliers(schedule, step, expected):
    assert compute_schedule_lr_multiplier(schedule, step, 100) == pytest.approx(expected)
    assert lr_at(step, 100, 2e-4, schedule) == pytest.approx(2e-4 * expected)


def test_warmup_ramps_linearly_then_the_schedule_decays_over_the_rest():
    base = 1e-3
    assert [lr_at(s, 14, base, "linear", warmup_steps=4) for s in range(4)] == pytest.approx(
        [base / 4, base / 2, 3 * base / 4, base]
    )
    assert lr_at(4, 14, base, "linear", warmup_steps=4) == pytest.approx(base)
    assert lr_at(9, 14, base, "linear", warmup_steps=4) == pytest.approx(base / 2)
    assert lr_at(9, 14, base, "cosine", warmup_steps=4) == pytest.approx(base / 2)
    assert lr_at(13, 14, base, "constant", warmup_steps=4) == base


def test_a_step_past_the_end_keeps_the_last_steps_rate():
    base = 1e-3
    assert lr_at(12, 10, base, "linear") == lr_at(9, 10, base, "linear") == pytest.approx(base / 10)
    assert lr_at(10, 10, base, "cosine") == lr_at(9, 10, base, "cosine") > 0


def test_bad_schedule_arguments_fail_clearly():
    with pytest.raises(ValueError, match="expected one of linear, cosine, constant"):
        lr_at(0, 10, 1e-3, "cosin")
    with pytest.raises(ValueError, match="total_steps"):
        lr_at(0, 0, 1e-3, "linear")


def test_recommended_lr_follows_the_cookbook_formula():
    assert get_lr("Qwen/Qwen3-8B") == pytest.approx(5e-4 * (2000 / 4096) ** 0.0775)
    assert get_lr("meta-llama/Llama-3.1-8B", is_lora=False) == pytest.approx(
        5e-5 * (2000 / 4096) ** 0.781
    )
    smol = get_lr("HuggingFaceTB/SmolLM2-135M-Instruct")
    assert smol == pytest.approx(5e-4 * (2000 / 576) ** 0.781)
    assert 1e-3 < smol < 2e-3
    assert get_lr("kitchen/tiny-llama") == pytest.approx(5e-4 * (2000 / 128) ** 0.781)
    assert get_lr("kitchen/tiny-qwen-x", hidden_size=128) == pytest.approx(
        5e-4 * (2000 / 128) ** 0.0775
    )
    assert model_family("Qwen/Qwen3-8B:peft:262144") == "qwen"


def test_recommended_lr_refuses_what_it_cannot_know():
    with pytest.raises(ValueError, match="no calibrated formula"):
        get_lr("openai/gpt-oss-20b")
    with pytest.raises(ValueError, match="pass hidden_size"):
        get_lr("kitchen/tiny-llama-unknown")
