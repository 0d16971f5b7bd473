"""rubric's grader at an OpenAI-compatible URL, through the official `openai` client over HTTP:
a small stand-in server on 127.0.0.1 (what was asked, a grade, a 500, a hang), `kitchen serve`
with tiny-llama, a URL where nothing listens; each failure counted and bounded, none a crashed
step; the API key sent but written nowhere."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from cookbook.envs.openai_completer import OpenAIChatCompleter
from cookbook.envs.rubric import GraderBroken, RubricEnv, RubricGrader, RubricItem
from cookbook.recipes.rubric import RubricConfig
from kitchen.app.cli import app
from kitchen.engine.errors import ConfigError
from tests.agentic.helpers import dry_run, runner, two_steps
from tests.agentic.test_rubric import RENDERER, TASK, answer
from tests.tinker_backend.conftest import TINY, free_port

openai = pytest.importorskip("openai", reason="the openai client: pip install 'kitchen[eval]'")
KEY_ENV, KEY = "KITCHEN_TEST_GRADER_KEY", "sk-grader-test-5f3a9c"


class StandIn:
    """/v1/chat/completions on 127.0.0.1: `mode` "grade" answers `<score>0.75</score>`, "error"
    a 500, "hang" nothing for 5 s. Records each request's headers and body."""

    def __init__(self, mode: str = "grade") -> None:
        self.mode, self.requests = mode, []
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                stand_in.requests.append((self.path, dict(self.headers), body))
                if stand_in.mode == "hang":
                    time.sleep(5)
                if stand_in.mode == "error":
                    return self._send(500, {"error": {"message": "grader overloaded"}})
                self._send(200, {
                    "id": "chatcmpl-1", "object": "chat.completion", "created": 0,
                    "model": body["model"],
                    "choices": [{"index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": "<score>0.75</score>"}}],
                })  # fmt: skip

            def _send(self, status: int, answer: Any) -> None:
                data = json.dumps(answer).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:  # the client timed out and closed the connection
                    pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def stand_in():  # type: ignore[no-untyped-def]
    server = StandIn()
    yield server
    server.close()


def endpoint_grader(url: str, **options: Any) -> RubricGrader:
    timeout = options.pop("timeout_s", 10.0)
    completer = OpenAIChatCompleter(url, "judge", 16, timeout, options.pop("key_env", None))
    return RubricGrader(completer, timeout, **options)


def test_the_grade_comes_back_over_http_with_the_prompt_model_and_key(stand_in, monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)
    grader = endpoint_grader(stand_in.url, key_env=KEY_ENV)
    result = answer(RubricEnv(TASK, RENDERER, grader), "5")
    assert result.reward == 0.75 and result.metrics["rubric_score"] == 0.75
    assert result.metrics["grader/failed"] == 0.0 and result.metrics["grader/unreadable"] == 0.0
    assert len(stand_in.requests) == 2  # one call per rubric item
    prompts = []
    for path, headers, body in stand_in.requests:
        assert path == "/v1/chat/completions"
        assert headers["Authorization"] == f"Bearer {KEY}"
        assert (body["model"], body["max_tokens"], body["temperature"]) == ("judge", 16, 0.0)
        prompts.append(body["messages"])
    graded = [*TASK.convo, {"role": "assistant", "content": "5"}]
    assert sorted(map(json.dumps, prompts)) == sorted(
        json.dumps(item.grader_prompt(graded)) for item in TASK.items
    )
    assert KEY not in repr(grader)


def test_a_server_error_is_a_counted_failure_and_past_the_bound_the_run_stops(stand_in):
    stand_in.mode = "error"
    grader = endpoint_grader(stand_in.url, retries=1, max_failures=3)
    result = answer(RubricEnv(TASK, RENDERER, grader), "5")
    assert result.reward == 0.0 and result.metrics["grader/failed"] == 2.0
    assert len(stand_in.requests) == 4  # each item: one try and one retry, none by the client
    with pytest.raises(GraderBroken, match=r"failed 4 times.*InternalServerError"):
        answer(RubricEnv(TASK, RENDERER, grader), "5")


def test_a_url_where_nothing_listens_is_a_counted_failure():
    grader = endpoint_grader(f"http://127.0.0.1:{free_port()}/v1", retries=0)
    result = answer(RubricEnv(TASK, RENDERER, grader), "5")
    assert result.metrics["grader/failed"] == 2.0 and grader.failures == 2
    assert grader.last_error is not None and "APIConnectionError" in grader.last_error


def test_a_grader_that_hangs_fails_at_its_timeout(stand_in):
    stand_in.mode = "hang"
    grader = endpoint_grader(stand_in.url, retries=0, timeout_s=0.3)
    start = time.monotonic()
    result = answer(RubricEnv(TASK, RENDERER, grader), "5")
    assert result.metrics["grader/failed"] == 2.0 and time.monotonic() - start < 3.0


def test_a_named_key_variable_must_be_set(monkeypatch):
    monkeypatch.delenv(KEY_ENV, raising=False)
    with pytest.raises(ConfigError, match=f"\\${KEY_ENV} is not set; it should hold the API key of http://h/v1"):  # fmt: skip
        OpenAIChatCompleter("http://h/v1", "judge", 16, api_key_env=KEY_ENV)


def test_the_config_takes_an_endpoint_and_refuses_what_does_not_apply_to_one():
    assert "config valid" in dry_run("rubric", "--grader-base-url", "http://127.0.0.1:9/v1",
                                     "--grader-api-key-env", KEY_ENV)  # fmt: skip
    with pytest.raises(ValueError, match="applies its own chat template"):
        RubricConfig(grader_base_url="http://h/v1", grader_renderer="chatml")
    with pytest.raises(ValueError, match="grader_api_key_env is the key of grader_base_url"):
        RubricConfig(grader_api_key_env=KEY_ENV)
    result = runner.invoke(
        app,
        ["run", "rubric", "--backend", "fake", "--dry-run", "--grader-renderer", "chatml",
         "--grader-base-url", "http://h/v1"],
    )  # fmt: skip
    assert result.exit_code != 0 and "applies its own chat template" in result.output


@pytest.mark.slow  # kitchen serve, its own process (the session's)
def test_kitchen_serve_grades_through_its_chat_route(server_url):
    completer = OpenAIChatCompleter(f"{server_url}/v1", TINY, 8, 60.0)
    item = RubricItem("Does the chatbot answer 5?")
    prompt = item.grader_prompt([*TASK.convo, {"role": "assistant", "content": "5"}])
    reply = asyncio.run(completer(prompt))
    direct = openai.OpenAI(base_url=f"{server_url}/v1", api_key="unused", max_retries=0)
    same = direct.chat.completions.create(model=TINY, messages=prompt, max_tokens=8, temperature=0)  # type: ignore[arg-type]
    assert reply == {"role": "assistant", "content": same.choices[0].message.content}
    grader = RubricGrader(completer)
    score, outcome = asyncio.run(grader.score(TASK.convo, item))
    assert outcome in ("graded", "unreadable") and grader.failures == 0


def files_holding(folder: Path, text: str) -> list[str]:
    return [str(p) for p in folder.rglob("*") if p.is_file() and text.encode() in p.read_bytes()]


@pytest.mark.slow  # 2-step runs, one graded by kitchen serve (its own process)
def test_two_steps_graded_over_http_and_two_with_the_grader_unreachable(
    server_url, tmp_path, monkeypatch
):
    monkeypatch.setenv(KEY_ENV, KEY)
    over_http = dict(max_tokens=6, grader_max_tokens=6, num_train=8, grader_api_key_env=KEY_ENV)
    served = two_steps("rubric", tmp_path / "served", grader_base_url=f"{server_url}/v1",
                       **over_http)  # fmt: skip
    # the tiny random grader writes no <score>: every grade came back, unreadable, none failed
    assert all(r["env/all/grader/failed"] == 0.0 for r in served)
    assert all(r["env/all/grader/unreadable"] == 1.0 for r in served)
    config = json.loads((tmp_path / "served" / "config.json").read_text())["config"]
    assert config["grader_api_key_env"] == KEY_ENV
    assert files_holding(tmp_path / "served", KEY) == []
    down = two_steps("rubric", tmp_path / "down", grader_base_url=f"http://127.0.0.1:{free_port()}/v1",
                     grader_retries=0, **over_http)  # fmt: skip
    assert all(r["env/all/grader/failed"] == 1.0 for r in down)  # counted; both steps trained
    assert files_holding(tmp_path / "down", KEY) == []
