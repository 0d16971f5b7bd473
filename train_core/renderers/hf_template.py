"""`hf_template`: any model whose tokenizer carries a chat template and has no built-in renderer.

The generation prompt is the template's own (`apply_chat_template(add_generation_prompt=True)`).
A supervised example is the template's rendering of the whole conversation, with loss weights
found by rendering it incrementally: the tokens through message i must be a token prefix of the
tokens through message i+1, so each message owns the tokens it adds. For an assistant message
the generation prompt before it must also be such a prefix; what it adds (the role header) is
prompt, the rest is the reply. Tokens after the reply's end-of-turn token (ChatML's newline)
are never sampled and get weight 0. A template that rewrites earlier turns (drops old
reasoning, counts messages up front) cannot be split this way and is refused with the message
index; a built-in renderer, or one registered for the format, is then the way.
"""

from __future__ import annotations

import numpy as np
import tinker

from train_core.renderers.base import (
    Renderer,
    check_trainable_field,
    encode_without_special_tokens,
    message_contexts,
)
from train_core.renderers.types import (
    Message,
    RenderContext,
    RenderedMessage,
    RendererError,
    Role,
    Tokenizer,
    TrainOnWhat,
)


def _is_prefix(prefix: list[int], tokens: list[int]) -> bool:
    return tokens[: len(prefix)] == prefix


class HFTemplateRenderer(Renderer):
    """Renders through the tokenizer's chat template (or `chat_template`, when given)."""

    def __init__(self, tokenizer: Tokenizer, chat_template: str | None = None) -> None:
        super().__init__(tokenizer)
        self.chat_template = chat_template or getattr(tokenizer, "chat_template", None)
        if not self.chat_template:
            raise RendererError(
                f"hf_template: tokenizer {self._source} has no chat template; pass one "
                "(HFTemplateRenderer(tokenizer, chat_template=...)) or use a built-in renderer"
            )

    @property
    def _source(self) -> str:
        """The model (or, failing that, the tokenizer) named in errors."""
        name = self._model_name or getattr(self.tokenizer, "name_or_path", None)
        return repr(name) if name else type(self.tokenizer).__name__

    def _render(self, messages: list[Message], generation_prompt: bool, index: int) -> list[int]:
        if not messages:
            return []
        try:
            text = self.tokenizer.apply_chat_template(
                [self.to_openai_message(m) for m in messages],
                tokenize=False,
                add_generation_prompt=generation_prompt,
                chat_template=self.chat_template,
            )
        except Exception as e:  # a template raises whatever its author chose (jinja, ValueError)
            raise RendererError(
                f"hf_template: the chat template of {self._source} fails on the conversation "
                f"through message {index}: {e}"
            ) from e
        return encode_without_special_tokens(self.tokenizer, str(text))

    @property
    def _end_of_turn(self) -> int | None:
        eos = getattr(self.tokenizer, "eos_token_id", None)
        return int(eos) if eos is not None else None

    @property
    def _end_message_token(self) -> int:
        """The EOS token: a reply is the text before it (MALFORMED without one)."""
        if self._end_of_turn is None:
            raise RendererError(
                f"hf_template: tokenizer {self._source} has no EOS token to stop on"
            )
        return self._end_of_turn

    def render_message(self, message: Message, ctx: RenderContext) -> RenderedMessage:
        raise RendererError(
            "hf_template renders whole conversations through the chat template, not one message "
            "at a time; use build_generation_prompt or build_supervised_example"
        )

    def build_generation_prompt(
        self, messages: list[Message], role: Role = "assistant", prefill: str | None = None
    ) -> tinker.ModelInput:
        if role != "assistant":
            raise RendererError(
                f"hf_template: a chat template's generation prompt opens an assistant turn, "
                f"not a {role!r} turn"
            )
        tokens = self._render(messages, True, len(messages) - 1)
        if prefill:
            tokens += encode_without_special_tokens(self.tokenizer, prefill)
        return tinker.ModelInput.from_ints(tokens)

    def build_supervised_example(
        self,
        messages: list[Message],
        train_on_what: TrainOnWhat = TrainOnWhat.LAST_ASSISTANT_MESSAGE,
    ) -> tuple[tinker.ModelInput, np.ndarray]:
        """The template's tokens for the conversation, weight 1 on what `train_on_what` selects."""
        train_on_what = TrainOnWhat(train_on_what)
        turn_start = self._last_assistant_turn_start_index(messages[:-1])
        tokens: list[int] = []
        weights_T: list[float] = []
        contexts = message_contexts(messages, turn_start)
        for idx, (message, ctx) in enumerate(zip(messages, contexts, strict=True)):
            check_trainable_field(message, idx, train_on_what)
            through = self._render(messages[: idx + 1], False, idx)
            self._check_prefix(tokens, through, idx, "the conversation before it")
            start = len(tokens)
            if message["role"] == "assistant":
                prompt = self._render(messages[:idx], True, idx)
                self._check_prefix(prompt, through, idx, "the generation prompt before it")
                start = max(start, len(prompt))
            trained = float(self._output_is_trained(message, ctx, train_on_what))
            reply = through[start:]
            end = len(reply)
            if message["role"] == "assistant" and self._end_of_turn in reply:
                end = len(reply) - reply[::-1].index(self._end_of_turn)  # through the last EOS
            weights_T += (
                [0.0] * (start - len(tokens)) + [trained] * end + [0.0] * (len(reply) - end)
            )
            tokens = through
        if train_on_what == TrainOnWhat.ALL_TOKENS:
            weights_T = [1.0] * len(tokens)
        return tinker.ModelInput.from_ints(tokens), np.array(weights_T, dtype=np.float32)

    def _check_prefix(self, prefix: list[int], tokens: list[int], idx: int, what: str) -> None:
        if not _is_prefix(prefix, tokens):
            raise RendererError(
                f"hf_template: the chat template of {self._source} cannot be split into turns: "
                f"the tokens through message {idx} do not start with the tokens of {what} (the "
                "template rewrites earlier turns); use a built-in renderer for this model"
            )
