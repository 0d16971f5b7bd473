"""The evaluator protocol: held-out metrics of the current weights.

Shaped like tinker-cookbook 0.6.1's TrainingClientEvaluator / SamplingClientEvaluator (an async
call with a client, returning flat metrics), with the held-out data passed per call instead of held
from construction, because a workflow only has the data once its setup has run:

    class NLLEvaluator:
        name = "nll"                          # the stage that runs it is "evaluate_nll"
        client = "training"                   # or "sampling"
        inputs = ("test_data", "tokenizer")   # names of the keyword arguments it is called with
        async def __call__(self, client, *, test_data, tokenizer) -> dict[str, float]: ...

Options (prefix, beta, limits) are constructor arguments. `client` says which client of the
current weights the evaluator scores: "training" (forward passes on the training client: in a
pipelined loop these see the weights before the step) or "sampling" (generation on a sampling
client of those weights). An evaluator with nothing to score (empty data) returns {}.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Protocol

from train_core.futures import resolve_future as resolve_future  # where evaluators import it

EvaluatorClient = Literal["training", "sampling"]


class Evaluator(Protocol):
    name: ClassVar[str]
    client: ClassVar[EvaluatorClient]
    inputs: ClassVar[tuple[str, ...]]

    # async (client, /, **inputs) -> metrics, called with the fields `inputs` names. Typed loosely
    # (a read-only member) because each evaluator spells out its own keyword-only inputs.
    @property
    def __call__(self) -> Callable[..., Awaitable[dict[str, float]]]: ...


@dataclass(frozen=True, kw_only=True)
class ConversationsEvaluator(ABC):
    """An Evaluator that samples (sampling client) on the held-out conversations with the run's
    renderer; a subclass says how in `evaluate`, which sees at least one conversation."""

    prefix: str = "test"
    client: ClassVar[EvaluatorClient] = "sampling"
    inputs: ClassVar[tuple[str, ...]] = ("test_conversations", "renderer")

    async def __call__(
        self, client: Any, /, *, test_conversations: Sequence[dict[str, Any]] | None, renderer: Any
    ) -> dict[str, float]:
        if not test_conversations:
            return {}
        return await self.evaluate(client, test_conversations, renderer)

    @abstractmethod
    async def evaluate(
        self, client: Any, conversations: Sequence[dict[str, Any]], renderer: Any
    ) -> dict[str, float]:
        """The metrics, `{prefix}/...`, of the (non-empty) held-out conversations."""
