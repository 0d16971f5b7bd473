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
from kitchen.app.play import parse_options, play_episode, read_answer
from kitchen.engine.errors import ConfigError
from kitchen.engine.plugins import DATASET_STORES, ENVS
from train_core.renderers import get_recommended_renderer_name, get_renderer
from train_core.rl.types import RLEnvContext

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
    assert {"arithmetic", "math", "guess_number", "code"} <= set(ENVS.names())
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
    with pytest.raises(
        ConfigError,
        match="--hihg is not an option of this env; options: --seed, --high, --max-turns",
    ):
        parse_options(GuessNumberEnvs, ["--hihg", "8"])
    with pytest.raises(ConfigError, match=r"--high: .*integer"):
        parse_options(GuessNumberEnvs, ["--high", "eight"])
    with pytest.raises(ConfigError, match="this env needs --source"):
        parse_options(MathEnvs, [])


def test_a_fenced_answer_goes_on_until_the_fence_closes():
    lines = iter(["```python", "a, b = 1, 2", "print(a + b)", "```", "not read"])
    assert read_answer(lambda _: next(lines)) == "```python\na, b = 1, 2\nprint(a + b)\n```"
    assert read_answer(lambda _: "```print(3)```") == "```print(3)```"  # closed on its line
    assert read_answer(lambda _: "16") == "16"


TMUX = shutil.which("tmux")
needs_tmux = pytest.mark.skipif(
    TMUX is None, reason="tmux is not installed (Debian: apt-get install tmux)"
)


class Pane:
    """`command` in a detached tmux session: type into it, read what it shows."""

    def __init__(self, command: str) -> None:
        assert TMUX is not None
        self.session = f"kitchen-play-{uuid.uuid4().hex[:8]}"
        subprocess.run(
            [TMUX, "new-session", "-d", "-s", self.session, "-x", "160", "-y", "60", command],
            check=True,
        )

    def text(self) -> str:
        return subprocess.run(
            [TMUX, "capture-pane", "-p", "-S", "-400", "-t", self.session],
            capture_output=True,
            text=True,
        ).stdout

    def wait_for(self, predicate, seconds: float = 60.0) -> str:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            text = self.text()
            if predicate(text):
                return text
            time.sleep(0.2)
        raise AssertionError(f"timed out; the pane shows:\n{self.text()}")

    def type(self, line: str) -> None:
        assert TMUX is not None
        subprocess.run([TMUX, "send-keys", "-t", self.session, "-l", line], check=True)
        subprocess.run([TMUX, "send-keys", "-t", self.session, "Enter"], check=True)

    def close(self) -> None:
        assert TMUX is not None
        subprocess.run([TMUX, "kill-session", "-t", self.session], capture_output=True)


KITCHEN = Path(sys.executable).with_name("kitchen")


@pytest.mark.slow  # launches a process
@needs_tmux
def test_play_in_a_terminal_under_tmux(tmp_path):
    pane = Pane(f"{KITCHEN} play guess_number --backend fake --high 4; echo EXIT=$?; sleep 60")

    try:
        for guess in "1234":
            text = pane.wait_for(
                lambda t, n=int(guess): "EXIT=" in t or t.count("your answer>") >= n
            )
            if "EXIT=" in text:
                break
            pane.type(guess)
        text = pane.wait_for(lambda t: "EXIT=" in t)
        (tmp_path / "pane.txt").write_text(text)
        assert "Guess it!" in text and "episode done: total reward 1" in text
        assert "EXIT=0" in text
    finally:
        pane.close()


def sandbox_problem() -> str | None:
    """Why the local sandbox cannot run here (None when it can)."""
    from kitchen.adapters.sandbox.local import LocalSandbox
    from kitchen.ports.sandbox import SandboxUnavailable

    box = LocalSandbox(max_concurrency=1)
    try:
        box.check()
    except SandboxUnavailable as e:
        return str(e)
    finally:
        box.close()
    return None


PRIME = 'print("YES" if n > 1 and all(n % d for d in range(2, int(n ** 0.5) + 1)) else "NO")'


@pytest.mark.slow  # launches a process
@needs_tmux
def test_play_code_under_tmux_runs_the_typed_program_in_the_sandbox(tmp_path):
    problem = sandbox_problem()
    if problem is not None:
        pytest.skip(f"the local sandbox (bubblewrap) cannot run here: {problem}")
    pane = Pane(f"{KITCHEN} play code --backend fake --env bundled; echo EXIT=$?; sleep 60")
    try:
        pane.wait_for(lambda t: "your answer>" in t)
        for line in ("```python", "n = int(input())", PRIME, "```"):
            pane.type(line)
        text = pane.wait_for(lambda t: "EXIT=" in t)
        (tmp_path / "pane.txt").write_text(text)
        assert "print YES if it is prime" in text  # seed 0's bundled problem
        assert "correct 1.0" in text and "episode done: total reward 1" in text, text
        assert "EXIT=0" in text
    finally:
        pane.close()
