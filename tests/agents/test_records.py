import pytest

from train_core.agents import CallLog


def _add(log: CallLog, prompt: list[int], sampled: list[int], version: int = 0):
    return log.add(
        "rollout-1",
        prompt_tokens=prompt,
        sampled_tokens=sampled,
        sampled_logprobs=[-0.5] * len(sampled),
        stop_reason="stop",
        sampler_version=version,
    )


def test_a_call_extends_the_previous_only_when_its_prompt_starts_with_prompt_and_reply():
    log = CallLog()
    first = _add(log, [1, 2], [3])
    second = _add(log, [1, 2, 3, 4], [5])
    third = _add(log, [1, 2, 4], [6])  # the reply re-rendered differently: not an extension
    assert (first.extends_previous, second.extends_previous, third.extends_previous) == (
        False,
        True,
        False,
    )
    assert [r.turn for r in log.calls("rollout-1")] == [0, 1, 2]


def test_take_hands_over_an_address_once():
    log = CallLog()
    _add(log, [1], [2])
    assert [r.prompt_tokens for r in log.take("rollout-1")] == [(1,)]
    assert log.take("rollout-1") == []
    assert log.addresses() == []


def test_a_record_refuses_logprobs_that_do_not_pair_with_tokens():
    log = CallLog()
    with pytest.raises(ValueError, match="2 sampled tokens but 1 logprobs"):
        log.add(
            "r",
            prompt_tokens=[1],
            sampled_tokens=[2, 3],
            sampled_logprobs=[-1.0],
            stop_reason="stop",
            sampler_version=0,
        )
