"""inspect-ai tasks as an Evaluator (sampling client): each task runs through inspect's
`eval_async` against the current weights (KitchenModelAPI), and every metric of its first
scorer is returned as `{prefix}/{task}/{metric}`, as tinker-cookbook 0.6.1's InspectEvaluator
reports them (it keys by dataset name; a task name is what a Kitchen task sets)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from train_core.evaluation.evaluator import EvaluatorClient


def inspect_metrics(logs: list[Any], prefix: str) -> dict[str, float]:
    """{prefix}/{task}/{metric} of every scored task log; a task that failed adds nothing."""
    out: dict[str, float] = {}
    for log in logs:
        results = getattr(log, "results", None)
        if results is None or not results.scores:
            continue
        for metric, value in results.scores[0].metrics.items():
            out[f"{prefix}/{log.eval.task}/{metric}"] = float(value.value)
    return out


@dataclass(frozen=True, kw_only=True)
class InspectEvaluator:
    """An Evaluator: the inspect tasks `tasks` builds (a callable returning a list of inspect
    Tasks, so each call gets fresh ones) run on the sampling client's weights."""

    tasks: Callable[[], list[Any]] = field(repr=False)
    prefix: str = "inspect"
    limit: int | None = None
    temperature: float = 0.0
    max_tokens: int = 256
    seed: int | None = 0
    log_dir: str | None = None  # inspect's logs; None: a temporary folder, removed after
    max_connections: int = 32
    name: ClassVar[str] = "inspect"
    client: ClassVar[EvaluatorClient] = "sampling"
    inputs: ClassVar[tuple[str, ...]] = ("renderer",)

    async def __call__(self, client: Any, /, *, renderer: Any) -> dict[str, float]:
        import tempfile

        from inspect_ai import eval_async
        from inspect_ai.model import GenerateConfig, Model

        from train_core.evaluation.inspect_model import KitchenModelAPI

        _quiet_display()
        config = GenerateConfig(temperature=self.temperature, max_tokens=self.max_tokens,
                                seed=self.seed, max_connections=self.max_connections)  # fmt: skip
        model = Model(KitchenModelAPI(client, renderer), config)
        with tempfile.TemporaryDirectory(prefix="kitchen-inspect-") as scratch:
            logs = await eval_async(
                tasks=self.tasks(), model=[model], limit=self.limit,
                log_dir=self.log_dir or scratch, fail_on_error=False, retry_on_error=0,
                log_realtime=False, log_level="warning", score_display=False,
            )  # fmt: skip
        return inspect_metrics(list(logs), self.prefix)


def _quiet_display() -> None:
    """No live terminal display inside a training run or a test (inspect's default is rich)."""
    from inspect_ai.util._display import init_display_type

    init_display_type("none")
