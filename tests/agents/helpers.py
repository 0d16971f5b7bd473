"""What the agent RL tests compare: the one datum an episode of extending calls trains as, the
datum forward_backward received (recorded by tests.helpers.record_forward_backward), the
monkeypatch that keeps the gateway's side, and the 2-step gateway run both agent recipes check."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

from tests.helpers import TWO_TINY_RL_STEPS, record_forward_backward, sent_datums

# agent_rl for 2 steps of 2 groups of 2 rollouts on tiny-llama, nothing saved.
TWO_TINY_STEPS: dict[str, Any] = {**TWO_TINY_RL_STEPS, "max_tokens": 6, "register_model": False}


def episode_datum(records: list[Any]) -> tuple[bytes, bytes]:
    """The one datum an episode of extending calls trains as: its last prompt + reply, shifted;
    the recorded logprobs on the sampled tokens, 0 on the observation tokens."""
    tokens: list[int] = []
    logprobs: list[float] = []
    for record in records:
        assert record.prompt_tokens[: len(tokens)] == tuple(tokens)  # it extends: one datum
        new = record.prompt_tokens[len(tokens) :]
        tokens += [*new, *record.sampled_tokens]
        logprobs += [0.0] * len(new) + list(record.sampled_logprobs)
    return (
        np.asarray(tokens[1:], dtype=np.int64).tobytes(),
        np.asarray(logprobs[1:], dtype=np.float32).tobytes(),
    )


def trained_datum(datum: Any) -> tuple[bytes, bytes]:
    """A datum forward_backward received, as episode_datum spells it."""
    return (
        datum.loss_fn_inputs["target_tokens"].to_numpy().astype(np.int64).tobytes(),
        datum.loss_fn_inputs["logprobs"].to_numpy().astype(np.float32).tobytes(),
    )


def record_gateway_takes(monkeypatch: Any) -> dict[str, list[Any]]:
    """Every address's records as the real gateway hands them to the seam."""
    from kitchen.serve.gateway.gateway import Gateway

    taken: dict[str, list[Any]] = {}
    take = Gateway.take

    def recording_take(self: Any, address: str) -> list[Any]:
        taken[address] = take(self, address)
        return taken[address]

    monkeypatch.setattr(Gateway, "take", recording_take)
    return taken


def run_on_recorded_gateway(
    monkeypatch: Any, recipe: str, cfg: dict[str, Any], log_dir: Any
) -> tuple[Any, dict[str, list[Any]], list[Any]]:
    """`recipe` run for TWO_TINY_STEPS + `cfg` on the local engine, with the gateway's takes and
    the datums forward_backward received recorded: (result, takes, datums). Under
    agent_transport http an in-process gateway client fails the run, so every call went over
    the socket."""
    from kitchen.adapters.local.clients.training_client import LocalTrainingClient
    from kitchen.app.launch import run
    from kitchen.serve.gateway.gateway import Gateway

    taken = record_gateway_takes(monkeypatch)
    calls = record_forward_backward(monkeypatch, LocalTrainingClient)
    if cfg.get("agent_transport") == "http":

        def in_process_client(self: Any, address: str) -> Any:
            raise AssertionError(f"{address}: an in-process client under agent_transport http")

        monkeypatch.setattr(Gateway, "client", in_process_client)
    result = run(recipe, {**TWO_TINY_STEPS, **cfg}, backend="local", log_dir=log_dir)
    return result, taken, sent_datums(calls)


def assert_trained_on_two_turn_records(
    taken: dict[str, list[Any]], trained: list[Any], mode: str
) -> None:
    """2 steps x 2 groups x 2 rollouts, each a 2-turn episode that extends its first call and
    trains as the one datum its records spell; sync samples each step with its own weights,
    async within one step of the step that trains them."""
    assert sorted(taken) == [f"{b}-{g}-{r}" for b in "01" for g in "01" for r in "01"]
    assert all(len(records) == 2 for records in taken.values())
    assert all(records[1].extends_previous for records in taken.values())
    versions = [records[0].sampler_version for _, records in sorted(taken.items())]
    if mode == "sync":
        assert versions == [0] * 4 + [1] * 4
    else:
        assert set(versions) <= {0, 1}
    assert Counter(map(trained_datum, trained)) == Counter(map(episode_datum, taken.values()))


async def two_tool_turns(
    client: Any,
    messages: list[Any],
    tools: list[Any],
    *,
    tool_result: str,
    nudge: str,
    **create: Any,
) -> list[Any]:
    """A 2-turn tool agent as users write them, on the policy: the reply goes back into the
    history as the client returned it, then `tool_result` for each tool call (or the user's
    `nudge`, when the model called none). The two responses, in order."""
    from kitchen.ports.agents import POLICY_MODEL

    messages = list(messages)
    responses = []
    for _ in range(2):
        response = await client.chat.completions.create(
            model=POLICY_MODEL,
            messages=messages,
            tools=tools,
            extra_body={"return_token_ids": True},
            **create,
        )
        responses.append(response)
        reply = response.choices[0].message
        messages.append(reply.model_dump(exclude_none=True))
        for call in reply.tool_calls or []:
            messages.append({"role": "tool", "tool_call_id": call.id, "content": tool_result})
        if not reply.tool_calls:
            messages.append({"role": "user", "content": nudge})
    return responses
