"""What a request's `model` names: a base model, or a sampler checkpoint the server can load.

    kitchen/tiny-llama, smollm2-135m, Org/Model     a base model (LoRA adapters off)
    tinker://<run>/sampler_weights/<name>           a checkpoint this server saved
    /path/to/checkpoint                             a folder the local engine wrote
    policy                                          the current weights (the agent gateway)

Each name opens one sampler, shared by every call on it, so requests on the same weights join the
same decode batch: a base model's for the server's life, a checkpoint's while a call holds it or
it is among the most recently used (ModelCatalog). `policy` is not kept here: the gateway leases
the snapshot it names to each call (kitchen/serve/gateway).
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from kitchen.serve.errors import UserError

if TYPE_CHECKING:
    from kitchen.serve.openai.generate import Choice
    from kitchen.serve.service import KitchenService


class ChatFormat:
    """The chat format of a base model, built on first use and shared by every sampler of it."""

    def __init__(self, base_model: str, tokenizer: Any, renderer: Any = None) -> None:
        """`renderer`: a train_core Renderer, a renderer's name, or None for the base model's."""
        self.base_model = base_model
        self._tokenizer = tokenizer
        self._renderer = renderer
        self._lock = threading.Lock()

    def renderer(self, shown: str) -> Any:
        """The format the base model was trained with; the tokenizer's own chat template when
        Kitchen knows no format for it (`shown`: the model name errors name)."""
        with self._lock:
            if isinstance(self._renderer, str):
                from train_core.renderers import get_renderer

                self._renderer = get_renderer(self._renderer, self._tokenizer)
            if self._renderer is None:
                from train_core.renderers import RendererError, get_renderer, resolve_renderer_name

                try:
                    name = resolve_renderer_name(self.base_model)
                except RendererError:
                    if not getattr(self._tokenizer, "chat_template", None):
                        raise UserError(
                            f"model {shown!r} has no known chat format and no chat template; "
                            "use /v1/completions"
                        ) from None
                    name = "hf_template"
                self._renderer = get_renderer(name, self._tokenizer)
            return self._renderer


@dataclass(frozen=True)
class ChatPrompt:
    """A chat call rendered fresh: the request's messages (train_core Messages), the tools it
    offers (None for none), the conversation rendered (a tool-declaring prefix and the messages)
    and its generation prompt's token ids."""

    messages: Sequence[Any]
    tools: list[dict[str, Any]] | None
    conversation: Sequence[Any]
    fresh: Sequence[int]


@dataclass(frozen=True)
class SampledCall:
    """One sampled call as its rollout records it: the prompt, the choice sampled from it (its
    tokens, their logprobs, why it stopped) and the policy version that sampled it; a chat call
    adds its `turn` and the `reply` it returned, which the next turn may extend."""

    prompt: Sequence[int]
    choice: Choice
    version: int
    turn: Any = None
    reply: dict[str, Any] | None = None


class CallRecorder(Protocol):
    """Where a call addressed to a rollout is recorded (kitchen/serve/gateway implements it)."""

    address: str

    def chat_turn(self, renderer: Any, rendered: ChatPrompt) -> Any:
        """A chat call's turn (its `.prompt`: token ids): the address's previous prompt + sampled
        tokens + the new messages' tokens where the call's messages extend the previous call's
        messages and its reply, else the fresh render's."""
        ...

    def admit(self, max_tokens: int | None) -> int | None:
        """Called before sampling: the tokens the call may sample (`max_tokens`, capped to what
        its rollout's budget has left); raises a UserError when the budget refuses the call."""
        ...

    def record(self, call: SampledCall) -> None:
        """Record one sampled call."""
        ...


@dataclass
class ServedModel:
    """One `model` name and the sampler serving it, as one call sees it."""

    name: str
    sampler: Any  # LocalSamplingClient, or any sampling client of the ports
    base_model: str
    created: int = field(default_factory=lambda: int(time.time()))
    chat_format: ChatFormat | None = None
    version: int = 0
    """The policy version of the sampler's weights (what the records say sampled)."""
    context: int | None = None
    """The model's context length where the sampler does not tell it (None: not checked here)."""
    rollout: CallRecorder | None = None
    """The rollout this call is addressed to; None: the call is not recorded."""

    def __post_init__(self) -> None:
        if self.chat_format is None:
            self.chat_format = ChatFormat(self.base_model, self.sampler.get_tokenizer())

    @property
    def tokenizer(self) -> Any:
        return self.sampler.get_tokenizer()

    @property
    def max_context(self) -> int | None:
        host = getattr(self.sampler, "host", None)
        own = host.max_context if host is not None else getattr(self.sampler, "max_context", None)
        return int(own) if isinstance(own, int) else self.context

    def renderer(self) -> Any:
        """The chat format the base model was trained with (ChatFormat.renderer)."""
        assert self.chat_format is not None
        return self.chat_format.renderer(self.name)

    def record(
        self,
        prompt: Sequence[int],
        choice: Choice,
        *,
        turn: Any = None,
        reply: dict[str, Any] | None = None,
    ) -> None:
        """Record the call's sampled `choice` where it is addressed to a rollout (a chat call
        passes its `turn` and `reply`)."""
        if self.rollout is not None:
            self.rollout.record(SampledCall(prompt, choice, self.version, turn, reply))

    def addressed(self, rollout: CallRecorder | None) -> ServedModel:
        """This model as a call addressed to `rollout` sees it."""
        return self if rollout is None else dataclasses.replace(self, rollout=rollout)


@dataclass
class Lease:
    """A model held for one call; `release()` once the call is done with it."""

    model: ServedModel
    release: Callable[[], None] = lambda: None


class ModelSource(Protocol):
    """The models a server's OpenAI routes serve, by `model` name."""

    async def lease(self, name: str, address: str | None) -> Lease:
        """The model called `name` for one call (addressed to rollout `address` if given);
        a UserError (404) for a name it does not serve."""
        ...

    def names(self) -> list[str]:
        """Model names one can ask for now (GET /v1/models)."""
        ...


KEPT_CHECKPOINTS = 8
"""Checkpoint samplers a catalog keeps open when no call holds them (the most recently used)."""


class ModelCatalog:
    """The samplers opened for OpenAI requests, by `model` name. Thread-safe.

    A base model's sampler is kept for the server's life (it shares the loaded base). A
    checkpoint's is kept while a call holds it or while it is among the KEPT_CHECKPOINTS most
    recently used: a run that names each step's checkpoint does not hold one sampler per step.
    """

    def __init__(self, service: KitchenService, kept_checkpoints: int = KEPT_CHECKPOINTS) -> None:
        self._service = service
        self._kept = kept_checkpoints
        self._lock = threading.Lock()
        self._models: dict[str, ServedModel] = {}  # in order of last use
        self._checkpoints: set[str] = set()
        self._holders: dict[str, int] = {}

    def get(self, name: str) -> ServedModel:
        """The model called `name`, opened on first use (may load weights: call off the loop)."""
        model, release = self.lease(name)
        release()
        return model

    def lease(self, name: str) -> tuple[ServedModel, Callable[[], None]]:
        """The model called `name` for one call, and the function that gives it back (may load
        weights: call off the loop)."""
        with self._lock:
            found = self._models.pop(name, None)
            if found is None:
                found, is_checkpoint = self._open(name)
                if is_checkpoint:
                    self._checkpoints.add(name)
            self._models[name] = found
            self._holders[name] = self._holders.get(name, 0) + 1

        def release() -> None:
            with self._lock:
                self._holders[name] -= 1
                self._forget_unused()

        return found, release

    def _forget_unused(self) -> None:
        """Drop the least recently used checkpoints past the kept number that no call holds."""
        idle = [n for n in self._models if n in self._checkpoints and not self._holders.get(n)]
        for name in idle[: max(0, len(idle) - self._kept)]:
            del self._models[name]
            self._checkpoints.discard(name)
            self._holders.pop(name, None)

    def names(self) -> list[str]:
        """Models one can ask for now: the base models in memory and every name open."""
        loaded = [name for name, _ in self._service.loaded_models()]
        with self._lock:
            opened = list(self._models)
        return list(dict.fromkeys([*loaded, *opened]))

    def _open(self, name: str) -> tuple[ServedModel, bool]:
        from kitchen.adapters.local.clients.checkpoints import META_FILE
        from kitchen.engine.errors import KitchenError

        is_checkpoint = name.startswith("tinker://") or (Path(name) / META_FILE).is_file()
        try:
            entry = (
                self._service.open_sampler(name, None)
                if is_checkpoint
                else self._service.open_sampler(None, name)
            )
        except KitchenError as e:
            raise UserError(str(e)) from None
        return ServedModel(name, entry.sampler, entry.base_model), is_checkpoint
