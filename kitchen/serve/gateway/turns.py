"""Exact multi-turn prompts: a chat call that continues the rollout's previous call gets the
previous prompt + the tokens sampled then + the new messages' tokens, never a re-render.

Turn k extends turn k-1 when its messages are turn k-1's messages, then the reply the gateway
returned (as the client sends it back), then new messages, with the same tools. The new messages'
tokens are what the chat format renders after that reply: the fresh render of the whole
conversation minus the render of the conversation up to and including the reply. That is only
sound where the format renders the reply in history as it renders a final reply (the fresh render
starts with the render through the reply) and the previous generation prompt is where the reply's
render starts; a format that rewrites history (drops thinking, say) fails the check, and the call
is rendered fresh: its record then says extends_previous=False, and the trainer splits there.

Between the sampled tokens and the new messages the reply is closed as the format closes every
reply (its end-of-turn tokens: what its render of this reply and of an empty one end with, from
the format's stop token on): nothing is added when the sample already ends with them, else they
are (a sample cut by max_tokens or a stop string); they train as observation. The sampled tokens stay as sampled, even
where re-encoding the reply's text would give others: that drift is what splicing avoids.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kitchen.serve.openai.models import ChatPrompt


@dataclass(frozen=True)
class ChatTurn:
    """One chat call of a rollout, as the next call may extend it."""

    messages: tuple[Any, ...]
    """The request's messages (train_core Messages, before any tool-declaring prefix)."""
    tools: Any
    """The tools the prompt declared (None for none)."""
    conversation: tuple[Any, ...]
    """What was rendered: the tool-declaring prefix and the messages."""
    prompt: tuple[int, ...]
    """The prompt the sampler saw (spliced or fresh)."""
    fresh: tuple[int, ...]
    """The conversation's own generation prompt (what a fresh render gives)."""
    extended: bool
    """Whether `prompt` was spliced onto the previous call."""


@dataclass(frozen=True)
class Sampled:
    """What a chat call sampled and the reply message returned for it."""

    turn: ChatTurn
    tokens: tuple[int, ...]
    reply: Any
    """The reply as a train_core Message (what the client must send back to extend)."""


def next_prompt(renderer: Any, previous: Sampled | None, rendered: ChatPrompt) -> ChatTurn:
    """The turn for a chat call on a rollout whose last chat call was `previous`."""
    turn = ChatTurn(
        messages=tuple(rendered.messages),
        tools=rendered.tools,
        conversation=tuple(rendered.conversation),
        prompt=tuple(rendered.fresh),
        fresh=tuple(rendered.fresh),
        extended=False,
    )
    spliced = _splice(renderer, previous, turn)
    return turn if spliced is None else replace(turn, prompt=tuple(spliced), extended=True)


def _splice(renderer: Any, previous: Sampled | None, turn: ChatTurn) -> list[int] | None:
    """`turn`'s prompt spliced onto `previous` (None where it does not extend it)."""
    tools, messages, conversation, fresh = turn.tools, turn.messages, turn.conversation, turn.fresh
    if previous is None or tools != previous.turn.tools:
        return None
    seen = len(previous.turn.messages)
    if len(messages) <= seen or list(messages[:seen]) != list(previous.turn.messages):
        return None
    if not same_message(messages[seen], previous.reply):
        return None
    # The conversation through the reply: the previous conversation (prefix included) + the reply.
    history = list(conversation[: len(previous.turn.conversation)])
    rendered = _render(renderer, [*history, messages[seen]])
    empty = _render(renderer, [*history, {"role": "assistant", "content": ""}])
    before = list(previous.turn.fresh)
    if rendered[: len(before)] != before or empty[: len(before)] != before:
        return None  # the generation prompt is not where the reply's render starts
    if list(fresh[: len(rendered)]) != rendered:
        return None  # the format renders the reply differently in history
    closing = _closing(renderer, rendered[len(before) :], empty[len(before) :])
    if not closing:
        return None  # the format closes this reply unlike an empty one
    sampled = list(previous.tokens)
    if sampled[-len(closing) :] == closing:
        closing = []
    return [*previous.turn.prompt, *sampled, *closing, *fresh[len(rendered) :]]


def _closing(renderer: Any, reply: list[int], empty: list[int]) -> list[int]:
    """The tokens both renders end with, from the first stop token among them (if any)."""
    n = 0
    while n < min(len(reply), len(empty)) and reply[-1 - n] == empty[-1 - n]:
        n += 1
    common = reply[len(reply) - n :]
    stops = {s for s in renderer.get_stop_sequences() if isinstance(s, int)}
    first = next((i for i, token in enumerate(common) if token in stops), 0)
    return common[first:]


def _render(renderer: Any, messages: list[Any]) -> list[int]:
    return list(renderer.build_supervised_example(messages)[0].to_ints())


def same_message(a: Any, b: Any) -> bool:
    """Whether two train_core Messages say the same (tool calls by id, name and arguments)."""
    keys = ("role", "content", "tool_call_id", "name")
    if any(a.get(k) != b.get(k) for k in keys):
        return False
    return _calls(a) == _calls(b)


def _calls(message: Any) -> list[tuple[Any, str, str]]:
    return [(c.id, c.function.name, c.function.arguments) for c in message.get("tool_calls") or []]
