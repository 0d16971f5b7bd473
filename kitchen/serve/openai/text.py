"""Sampled tokens -> the text an OpenAI client sees, also while the sample is still growing.

OpenAI's `stop` strings end a sample and are left out of its text; the engine (as the Tinker
service) keeps the stop token or string in the sample. A `TextStream` cuts the text at the first
stop string and, while streaming, holds back any tail that may still grow into one (and a
half-decoded UTF-8 character), so streamed deltas always add up to the final text.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Any

_PARTIAL_CHAR = "\ufffd"  # what a tokenizer decodes an incomplete UTF-8 sequence to


class TextStream:
    """The text of one sample, fed token by token."""

    def __init__(self, tokenizer: Any, stop_strings: Iterable[str], stop_ids: Collection[int]):
        self._tokenizer = tokenizer
        self._stops = [s for s in stop_strings if s]
        self._stop_ids = stop_ids
        self._tokens: list[int] = []
        self._text = ""
        self._ended = False
        self._sent = 0  # characters already handed out by `push`

    @property
    def text(self) -> str:
        """The text so far, cut before any stop string or stop token."""
        return self._text

    def push(self, token: int) -> str:
        """Add a token; return the text that is now certain and was not returned before."""
        if self._ended:
            return ""
        if token in self._stop_ids:
            self._ended = True
        else:
            self._tokens.append(token)
            self._text = self._tokenizer.decode(self._tokens, skip_special_tokens=False)
            cut = min((i for s in self._stops if (i := self._text.find(s)) >= 0), default=-1)
            if cut >= 0:
                self._text, self._ended = self._text[:cut], True
        safe = len(self._text) if self._ended else len(self._text) - self._held_back()
        delta = self._text[self._sent : max(safe, self._sent)]
        self._sent += len(delta)
        return delta

    def finish(self) -> str:
        """The rest of the text, once the sample is complete."""
        delta = self._text[self._sent :]
        self._sent = len(self._text)
        return delta

    def _held_back(self) -> int:
        """Characters at the end that a stop string or the next token may still change."""
        text = self._text
        hold = len(text) - len(text.rstrip(_PARTIAL_CHAR))
        for stop in self._stops:
            for k in range(min(len(stop) - 1, len(text)), 0, -1):
                if text.endswith(stop[:k]):
                    hold = max(hold, k)
                    break
        return hold


def final_text(
    tokenizer: Any, tokens: Iterable[int], stop_strings: Iterable[str], stop_ids: Collection[int]
) -> str:
    """The text of a finished sample (what the streamed deltas add up to)."""
    stream = TextStream(tokenizer, stop_strings, stop_ids)
    for token in tokens:
        stream.push(token)
    return stream.text
