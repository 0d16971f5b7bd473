"""What the agent RL tests compare: the one datum an episode of extending calls trains as, the
datum forward_backward received (recorded by tests.helpers.record_forward_backward), and the
monkeypatch that keeps the gateway's side."""

from __future__ import annotations

from typing import Any

import numpy as np

from tests.helpers import TWO_TINY_RL_STEPS

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
