"""The official `openai` client against `kitchen serve`: completions, chat, streaming, logprobs."""

from __future__ import annotations

import pytest

from tests.tinker_backend.conftest import TINY

openai = pytest.importorskip("openai", reason="the openai client: pip install 'kitchen[eval]'")
PROMPT = "The kitchen opens before sunrise, when"


def test_models_lists_the_preloaded_base_model(client) -> None:
    assert TINY in [m.id for m in client.models.list().data]
    assert client.models.retrieve(TINY).id == TINY


def test_streamed_completion_adds_up_to_the_plain_one(client) -> None:
    plain = client.completions.create(model=TINY, prompt=PROMPT, max_tokens=12, temperature=0)
    chunks = list(
        client.completions.create(
            model=TINY, prompt=PROMPT, max_tokens=12, temperature=0, stream=True
        )
    )
    assert "".join(c.choices[0].text for c in chunks) == plain.choices[0].text
    assert chunks[-1].choices[0].finish_reason == plain.choices[0].finish_reason == "length"
    assert plain.usage.completion_tokens == 12


def test_seed_and_n_give_reproducible_distinct_samples(client) -> None:
    def sample():  # type: ignore[no-untyped-def]
        return client.completions.create(model=TINY, prompt=PROMPT, max_tokens=8, n=3, seed=7)

    first, again = sample(), sample()
    texts = [c.text for c in first.choices]
    assert texts == [c.text for c in again.choices]
    assert [c.index for c in first.choices] == [0, 1, 2]
    assert len(set(texts)) > 1


def test_stop_string_ends_the_text_before_it(client) -> None:
    full = client.completions.create(model=TINY, prompt=PROMPT, max_tokens=12, temperature=0)
    text = full.choices[0].text
    stop = text[len(text) // 2 : len(text) // 2 + 2]
    cut = client.completions.create(
        model=TINY, prompt=PROMPT, max_tokens=12, temperature=0, stop=[stop]
    )
    assert cut.choices[0].text == text[: text.index(stop)]
    assert cut.choices[0].finish_reason == "stop"


def test_echo_logprobs_are_the_engines_prompt_logprobs(client) -> None:
    from tinker import types

    from kitchen.adapters.local import create_local_backend
    from kitchen.ports import BackendSettings

    backend = create_local_backend(BackendSettings())  # as the server: dtype and device "auto"
    sampler = backend.create_sampling_client(base_model=TINY)
    tokens = sampler.get_tokenizer().encode(PROMPT)
    expected = sampler.compute_logprobs(types.ModelInput.from_ints(tokens)).result()
    backend.close()

    out = client.completions.create(
        model=TINY, prompt=tokens, max_tokens=1, echo=True, logprobs=1, temperature=0
    )
    logprobs = out.choices[0].logprobs
    assert len(logprobs.token_logprobs) == len(tokens) + 1
    assert logprobs.token_logprobs[0] is None
    got = logprobs.token_logprobs[1 : len(tokens)]
    assert max(abs(a - b) for a, b in zip(got, expected[1:], strict=True)) < 1e-4
    # Greedy: the generated token is the most likely one at its position.
    assert logprobs.token_logprobs[-1] == pytest.approx(max(logprobs.top_logprobs[-1].values()))


def test_chat_reply_is_parsed_by_the_renderer_and_streams_the_same(client) -> None:
    messages = [{"role": "user", "content": "How long does the chili cook?"}]
    plain = client.chat.completions.create(
        model=TINY, messages=messages, max_tokens=10, temperature=0, logprobs=True, top_logprobs=2
    )
    reply = plain.choices[0]
    assert reply.message.role == "assistant"
    assert "<|im_end|>" not in reply.message.content
    assert len(reply.logprobs.content) == plain.usage.completion_tokens
    assert all(len(t.top_logprobs) == 2 for t in reply.logprobs.content)
    chunks = list(
        client.chat.completions.create(
            model=TINY,
            messages=messages,
            max_tokens=10,
            temperature=0,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert streamed == reply.message.content
    assert chunks[-1].usage.completion_tokens == plain.usage.completion_tokens


def test_mistakes_come_back_as_client_errors_with_the_reason(client) -> None:
    with pytest.raises(openai.BadRequestError, match="not in the local Hugging Face cache"):
        client.completions.create(model="nobody/nothing", prompt="hi")
    with pytest.raises(openai.BadRequestError, match="frequency_penalty"):
        client.completions.create(model=TINY, prompt="hi", frequency_penalty=1.0)
    with pytest.raises(openai.BadRequestError, match="temperature"):
        client.chat.completions.create(
            model=TINY, messages=[{"role": "user", "content": "hi"}], temperature=5
        )
