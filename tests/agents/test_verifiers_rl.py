"""The verifiers_rl recipe: a verifiers 0.4 env (verifiers.v1) played through a rollout's own
openai client, its plan, the bundled reverse-text env, and 2 steps on the tiny model through the
run's gateway, in-process and over HTTP, whose trained datums are the gateway's records byte for
byte, each 2-turn episode one datum."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import openai
import pytest
import verifiers.v1 as vf
from typer.testing import CliRunner

from cookbook.envs.verifiers_bridge import EpisodeError, env_config, play_episode
from cookbook.envs.verifiers_reverse_text import (
    CHECK_AGAIN,
    SYSTEM_PROMPT,
    TASKSET_ID,
    answer_of,
    similarity,
)
from kitchen.app.cli import app
from tests.agents.helpers import assert_trained_on_two_turn_records, run_on_recorded_gateway
from tests.helpers import local_engine_ready, modules_loaded_by

runner = CliRunner()
SAMPLING = vf.SamplingConfig(max_tokens=8, temperature=1.0)


class Replies:
    """An `openai.AsyncOpenAI` on a mock transport: every chat call is kept, and answered with
    `answer(text)` in the tags, where text is the conversation's first user message."""

    def __init__(self, answer: Any, status: int = 200) -> None:
        self.answer, self.status = answer, status
        self.bodies: list[dict[str, Any]] = []

    def client(self) -> openai.AsyncOpenAI:
        async def handle(request: httpx.Request) -> httpx.Response:
            assert request.url.path == "/rollouts/ep/v1/chat/completions"
            body = json.loads(request.content)
            self.bodies.append(body)
            if self.status != 200:
                return httpx.Response(self.status, json={"error": {"message": "boom"}})
            text = next(m["content"] for m in body["messages"] if m["role"] == "user")
            reply = f"<reversed_text>{self.answer(text)}</reversed_text>"
            return httpx.Response(200, json=_completion(reply))

        return openai.AsyncOpenAI(
            base_url="http://gateway.test/rollouts/ep/v1",
            api_key="test",
            http_client=httpx.AsyncClient(transport=httpx.MockTransport(handle)),
            max_retries=0,
        )


def _completion(content: str) -> dict[str, Any]:
    return {
        "id": "c",
        "object": "chat.completion",
        "created": 0,
        "model": "policy",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
    }


def _first_task(turns: int = 1, seed: int = 0) -> tuple[vf.EnvConfig, vf.Task]:
    config = env_config(TASKSET_ID, {"turns": turns, "seed": seed})
    return config, next(iter(vf.load_taskset(config.taskset)))


def _play(replies: Replies, turns: int) -> float:
    config, task = _first_task(turns)
    return asyncio.run(play_episode(replies.client(), task, env_config=config, sampling=SAMPLING))


def test_dry_run_prints_the_plan_with_the_policy_swap() -> None:
    result = runner.invoke(
        app, ["run", "verifiers_rl", "--backend", "fake", "--dry-run"], terminal_width=200
    )
    assert result.exit_code == 0, result.output
    assert "config valid" in result.output and "set_agent_policy" in result.output
    assert "taskset_id='kitchen-reverse-text'" in result.output


def test_the_cookbook_preset_is_tinker_cookbooks_verifiers_rl_defaults() -> None:
    from cookbook.recipes.verifiers_rl import VerifiersRLConfig
    from kitchen.app.resolve import resolve_config

    cfg = resolve_config("verifiers_rl", preset="cookbook").config
    assert isinstance(cfg, VerifiersRLConfig)
    assert (cfg.model_name, cfg.renderer_name, cfg.lora_rank) == (
        "Qwen/Qwen3.5-4B",
        "qwen3_5_disable_thinking",
        32,
    )
    assert (cfg.group_size, cfg.groups_per_batch, cfg.max_tokens) == (8, 32, 512)
    assert (cfg.optimizer.learning_rate, cfg.kl.penalty_coef) == (1e-5, 0.0)
    assert cfg.vf_env_id == TASKSET_ID


def test_an_unknown_taskset_id_exits_2_naming_the_flag() -> None:
    result = runner.invoke(app, ["run", "verifiers_rl", "--dry-run", "vf_env_id=no-such-env"])
    assert result.exit_code == 2, result.output
    assert "vf-env-id" in result.output and "no-such-env" in result.output


def test_the_reward_is_the_similarity_of_the_tagged_answer_to_the_reversed_string() -> None:
    assert answer_of(
        "ok <reversed_text>cba</reversed_text> <reversed_text>fed</reversed_text>"
    ) == ("fed")
    assert answer_of("  cba ") == "cba"
    assert similarity("olleh", "olleh") == 1.0
    assert similarity("", "olleh") == 0.0
    assert 0.0 < similarity("olle", "olleh") < 1.0


def test_tasks_are_a_function_of_the_seed() -> None:
    def texts(seed: int) -> list[str]:
        config = env_config(TASKSET_ID, {"seed": seed})
        return [t.data.text for t in vf.load_taskset(config.taskset).take(6)]

    assert texts(1) == texts(1) and texts(1) != texts(2)
    assert all(2 <= len(text.split()) <= 4 for text in texts(1))


def test_an_episode_sends_the_tasks_prompt_and_scores_the_reply() -> None:
    right, wrong = Replies(lambda text: text[::-1]), Replies(lambda text: text)
    assert _play(right, turns=1) == 1.0
    assert _play(wrong, turns=1) < 1.0
    (body,) = right.bodies
    _, task = _first_task()
    assert body["model"] == "policy" and body["max_tokens"] == 8 and body["temperature"] == 1.0
    assert body["messages"] == [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": task.data.text},
    ]


def test_a_two_turn_episode_sends_back_the_reply_it_got_then_the_check() -> None:
    replies = Replies(lambda text: text[::-1])
    assert _play(replies, turns=2) == 1.0
    first, second = (body["messages"] for body in replies.bodies)
    reply = f"<reversed_text>{first[1]['content'][::-1]}</reversed_text>"
    # the conversation extends: the gateway's prompt is then the previous prompt + reply + check
    assert second == [
        *first,
        {"role": "assistant", "content": reply},
        {"role": "user", "content": CHECK_AGAIN},
    ]


def test_a_failed_model_call_fails_the_episode_in_one_line() -> None:
    with pytest.raises(EpisodeError, match="verifiers episode not ok: ") as caught:
        _play(Replies(lambda text: text, status=500), turns=1)
    assert "\n" not in str(caught.value)


@pytest.mark.skipif(not local_engine_ready(), reason="local engine not available")
@pytest.mark.slow
@pytest.mark.parametrize(
    ("transport", "mode"), [("in_process", "sync"), ("http", "sync"), ("in_process", "async")]
)
def test_two_steps_train_on_the_gateways_records_byte_for_byte(
    monkeypatch: Any, tmp_path: Any, transport: str, mode: str
) -> None:
    cfg = {"agent_transport": transport, "mode": mode, "vf_env_args": {"turns": 2}}
    result, taken, trained = run_on_recorded_gateway(monkeypatch, "verifiers_rl", cfg, tmp_path)
    assert result.steps == 2
    assert_trained_on_two_turn_records(taken, trained, mode)  # answer, then check again
    steps = [m for m in result.metrics if "agents/splits" in m]
    assert [(m["agents/splits"], m["num_datums"]) for m in steps] == [(0.0, 4), (0.0, 4)]
    assert all(0.0 <= m["env/all/reward/total"] <= 1.0 for m in steps)


def test_the_recipe_names_the_bundled_ids_without_importing_verifiers() -> None:
    from cookbook.envs.verifiers_bridge import HARNESS_ID
    from cookbook.recipes.verifiers_rl import VerifiersRLConfig

    fields = VerifiersRLConfig.model_fields
    assert (fields["vf_env_id"].default, fields["vf_harness_id"].default) == (
        TASKSET_ID,
        HARNESS_ID,
    )
    loaded = modules_loaded_by("import cookbook.recipes.verifiers_rl", ("verifiers",))
    assert loaded == []


def test_an_unknown_harness_id_exits_2_naming_the_flag() -> None:
    result = runner.invoke(app, ["run", "verifiers_rl", "--dry-run", "vf_harness_id=no-such"])
    assert result.exit_code == 2, result.output
    assert "vf-harness-id" in result.output and "no installed verifiers harness" in result.output


def test_a_streamed_call_is_relayed_as_the_gateways_events() -> None:
    from verifiers.v1.dialects import ChatDialect

    from cookbook.envs.verifiers_bridge import GatewayModelClient

    events = [
        b'data: {"choices": [{"index": 0, "delta": {"content": "ab"}}]}\n\n',
        b'data: {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}\n\n',
        b"data: [DONE]\n\n",
    ]
    seen: list[dict[str, Any]] = []

    async def handle(request: httpx.Request) -> httpx.Response:
        seen.append(json.loads(request.content))
        return httpx.Response(
            200, content=b"".join(events), headers={"content-type": "text/event-stream"}
        )

    client = openai.AsyncOpenAI(
        base_url="http://gateway.test/rollouts/ep/v1",
        api_key="test",
        http_client=httpx.AsyncClient(transport=httpx.MockTransport(handle)),
    )

    async def relayed() -> list[bytes]:
        reply = await GatewayModelClient(client).relay(ChatDialect(), {"stream": True})
        chunks = [chunk async for chunk in reply.chunks]
        await reply.close()
        return chunks

    assert asyncio.run(relayed()) == events
    assert seen == [{"stream": True}]
