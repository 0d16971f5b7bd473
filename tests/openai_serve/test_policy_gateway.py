"""`kitchen serve`'s gateway: the model name `policy` (the preloaded base model, then the newest
snapshot a training session takes), calls addressed to rollouts and their records served per
address; token ids and streamed logprobs on its routes."""

from __future__ import annotations

import httpx
import pytest

from kitchen.ports.agents import POLICY_MODEL, ROLLOUT_HEADER
from tests.tinker_backend.conftest import TEST_KEY, TINY

openai = pytest.importorskip("openai", reason="the openai client: pip install 'kitchen[eval]'")
USER = [{"role": "user", "content": "What is on the menu?"}]


def _calls(server_url: str, address: str, take: bool = False) -> list[dict]:
    route = f"{server_url}/kitchen/v1/rollouts/{address}/" + ("take" if take else "calls")
    response = httpx.post(route) if take else httpx.get(route)
    response.raise_for_status()
    return list(response.json()["calls"])


def test_token_ids_on_request_in_vllms_fields(client) -> None:
    chat = client.chat.completions.create(
        model=TINY, messages=USER, max_tokens=4, extra_body={"return_token_ids": True}
    )
    assert chat.prompt_token_ids and len(chat.choices[0].token_ids) == chat.usage.completion_tokens
    plain = client.chat.completions.create(model=TINY, messages=USER, max_tokens=4)
    assert getattr(plain, "prompt_token_ids", None) is None
    text = client.completions.create(
        model=TINY, prompt=[5, 6, 7], max_tokens=3, extra_body={"return_token_ids": True}
    )
    assert text.choices[0].prompt_token_ids == [5, 6, 7] and len(text.choices[0].token_ids) == 3


def test_streamed_completion_logprobs_are_the_plain_ones(client) -> None:
    kwargs = {"model": TINY, "prompt": "Soup of the day:", "max_tokens": 6, "seed": 3}
    plain = client.completions.create(logprobs=0, temperature=0.9, **kwargs)
    chunks = list(client.completions.create(logprobs=0, temperature=0.9, stream=True, **kwargs))
    streamed = [
        lp for c in chunks if c.choices[0].logprobs for lp in c.choices[0].logprobs.token_logprobs
    ]
    assert streamed == plain.choices[0].logprobs.token_logprobs
    with pytest.raises(openai.BadRequestError, match="logprobs=2"):
        list(client.completions.create(logprobs=2, stream=True, **kwargs))


def test_policy_is_the_base_model_then_the_newest_training_snapshot(
    server_url: str, client
) -> None:
    import tinker

    headers = {ROLLOUT_HEADER: "serve-ep-1"}
    client.chat.completions.create(
        model=POLICY_MODEL, messages=USER, max_tokens=3, extra_headers=headers
    )
    (base,) = _calls(server_url, "serve-ep-1", take=True)
    service = tinker.ServiceClient(base_url=server_url, api_key=TEST_KEY)
    try:
        training = service.create_lora_training_client(TINY, rank=2)
        training.save_weights_and_get_sampling_client().result()
        by_path = client.with_options(base_url=f"{server_url}/rollouts/serve-ep-2/v1")
        by_path.chat.completions.create(model=POLICY_MODEL, messages=USER, max_tokens=3)
        calls = _calls(server_url, "serve-ep-2")
    finally:
        service.close("success").result()
    assert base["sampler_version"] == 0 and calls[0]["sampler_version"] >= 1
    assert calls[0]["prompt_tokens"] == base["prompt_tokens"]  # same conversation, same render
    assert POLICY_MODEL in [m.id for m in client.models.list().data]
