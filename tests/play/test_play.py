"""`kitchen play`: a person as the policy, scripted here and driven for real under tmux."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

import kitchen.app.builtins  # noqa: F401  (registers the hf dataset store)
from cookbook.envs.arithmetic import ArithmeticEnvs
from cookbook.envs.guess_number import GuessNumberEnvs
from cookbook.envs.math import MathEnvs
from kitchen.adapters.fake import FakeBackend
from kitchen.app.play import parse_options, play_episode
from kitchen.engine.errors import ConfigError
from kitchen.engine.registry import DATASET_STORES, ENVS
from kitchen.workflows.reinforcement.stages import RLEnvContext
from train_core.renderers import get_recommended_renderer_name, get_renderer

MODEL = "HuggingFaceTB/SmolLM2-135M-Instruct"


def context() -> RLEnvContext:
    tokenizer = FakeBackend().create_lora_training_client(MODEL).get_tokenizer()
    renderer = get_renderer(get_recommended_renderer_name(MODEL), tokenizer)
    return RLEnvContext(renderer, tokenizer, DATASET_STORES.get("hf")())


def play(factory, answers: list[str]) -> tuple[float, str, int]:
    shown: list[str] = []
    queue = list(answers)

    def read(prompt: str) -> str:
        shown.append(prompt)
        return queue.pop(0)

    total = asyncio.run(play_episode(factory, context(), read, shown.append))
    return total, "".join(shown), len(answers) - len(queue)


def test_the_cookbook_envs_are_registered():
    assert {"arithmetic", "math", "guess_number"} <= set(ENVS.names())
    assert ENVS.get("guess_number") is GuessNumberEnvs


def test_a_right_answer_earns_the_reward_and_a_wrong_one_does_not():
    factory = ArithmeticEnvs(**parse_options(ArithmeticEnvs, ["--max-operand", "10"]))
    total, shown, _ = play(factory, ["16"])  # seed 0's problem: 9 + 7
    assert "What is 9 + 7?" in shown and "[reward 1; format 1.0, correct 1.0" in shown
    assert total == 1.0
    assert play(factory, ["17"])[0] == 0.0


def test_multi_turn_shows_each_hint_and_hides_the_secret_until_the_end():
    factory = GuessNumberEnvs(**parse_options(GuessNumberEnvs, ["--high", "4"]))
    total, shown, used = play(factory, ["1", "2", "3", "4"])
    assert total == 1.0 and 1 <= used <= 4
    before_end = shown.rsplit("[reward", 1)[0]
    assert "secret" not in before_end  # a spoiler otherwise
    assert "secret" in shown.rsplit("[reward", 1)[1]
    assert shown.count("your answer> ") == used


def test_options_are_typed_and_checked():
    assert parse_options(GuessNumberEnvs, ["high=8", "--max-turns", "2"]) == {
        "groups_per_batch": 1, "group_size": 1, "n_batches": 1, "test_problems": 0, "high": 8, "max_turns": 2,
    }  # fmt: skip
    with pytest.raises(ConfigError, match="--hihg is not an option of this env; options: --high"):
        parse_options(GuessNumberEnvs, ["--hihg", "8"])
    with pytest.raises(ConfigError, match=r"--high: .*integer"):
        parse_options(GuessNumberEnvs, ["--high", "eight"])
    with pytest.raises(ConfigError, match="this env needs --source"):
        parse_options(MathEnvs, [])


TMUX = shutil.which("tmux")


@pytest.mark.skipif(TMUX is None, reason="tmux is not installed (Debian: apt-get install tmux)")
def test_play_in_a_terminal_under_tmux(tmp_path):
    session = f"kitchen-play-{uuid.uuid4().hex[:8]}"
    kitchen = Path(sys.executable).with_name("kitchen")
    command = f"{kitchen} play guess_number --backend fake --high 4; echo EXIT=$?; sleep 60"
    subprocess.run(
        [TMUX, "new-session", "-d", "-s", session, "-x", "160", "-y", "60", command], check=True
    )

    def pane() -> str:
        return subprocess.run(
            [TMUX, "capture-pane", "-p", "-S", "-200", "-t", session],
            capture_output=True,
            text=True,
        ).stdout

    def wait_for(predicate, seconds: float = 60.0) -> str:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            text = pane()
            if predicate(text):
                return text
            time.sleep(0.2)
        raise AssertionError(f"timed out; the pane shows:\n{pane()}")

    try:
        for guess in "1234":
            text = wait_for(lambda t, n=int(guess): "EXIT=" in t or t.count("your answer>") >= n)
            if "EXIT=" in text:
                break
            subprocess.run([TMUX, "send-keys", "-t", session, guess, "Enter"], check=True)
        text = wait_for(lambda t: "EXIT=" in t)
        (tmp_path / "pane.txt").write_text(text)
        assert "Guess it!" in text and "episode done: total reward 1" in text
        assert "EXIT=0" in text
    finally:
        subprocess.run([TMUX, "kill-session", "-t", session], capture_output=True)
