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


def test_a_call_that_started_first_is_recorded_first_though_it_finished_last():
    log = CallLog()
    slow, fast = log.start("rollout-1"), log.start("rollout-1")
    late = log.add(
        "rollout-1",
        prompt_tokens=[1, 2, 3, 4],
        sampled_tokens=[5],
        sampled_logprobs=[-0.5],
        stop_reason="stop",
        sampler_version=0,
        started=fast,
    )
    assert (late.turn, late.extends_previous) == (0, False)
    log.add(
        "rollout-1",
        prompt_tokens=[1, 2],
        sampled_tokens=[3],
        sampled_logprobs=[-0.5],
        stop_reason="stop",
        sampler_version=0,
        started=slow,
    )
    first, second = log.calls("rollout-1")
    assert (first.started, second.started) == (slow, fast) == (0, 1)
    assert [first.turn, second.turn] == [0, 1]
    # Re-derived against the call now before it: [1, 2, 3, 4] extends [1, 2] + [3].
    assert (first.prompt_tokens, first.extends_previous) == ((1, 2), False)
    assert (second.prompt_tokens, second.extends_previous) == ((1, 2, 3, 4), True)
    assert _add(log, [9], [9]).started == 2  # a call added without a number starts now
    log.take("rollout-1")
    assert log.start("rollout-1") == 0  # a finished rollout's numbers go with it
