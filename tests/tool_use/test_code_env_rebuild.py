"""code_rl's check_solution env, rebuilt on train_core.tool_use, records what the hand-rolled
env recorded: every scripted episode's rewards, prompts and metrics (in order), and every log
it wrote (the rebuilt env also logs the parse errors' text)."""

from __future__ import annotations

import json

import pytest

from tests.tool_use.code_transcripts import EPISODES, GOLDEN, transcripts

RECORDED = json.loads(GOLDEN.read_text())
NOW = json.loads(json.dumps(transcripts(), sort_keys=True))


@pytest.mark.parametrize("episode", sorted(EPISODES))
def test_the_rebuilt_env_replays_the_hand_rolled_one(episode):
    now, recorded = NOW[episode], RECORDED[episode]
    assert [{k: v for k, v in t.items() if k != "logs"} for t in now] == [
        {k: v for k, v in t.items() if k != "logs"} for t in recorded
    ]
    for turn_now, turn_then in zip(now, recorded, strict=True):
        logs = turn_now.get("logs", {})
        assert {k: logs.get(k) for k in turn_then.get("logs", {})} == turn_then.get("logs", {})


def test_the_recording_covers_tool_results_errors_and_every_stop():
    text = json.dumps(RECORDED)
    for seen in ('\\"passed\\": true', "unknown tool 'run_python'", "check_solution needs",
                 "stop/completed", "stop/max_turns", "stop/parse_error"):  # fmt: skip
        assert seen in text, seen
