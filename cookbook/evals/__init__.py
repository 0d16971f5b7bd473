"""Evaluators a recipe runs inline at their own cadence (chat_sl's `inline_evals`), by name: the
table INLINE_EVALS maps a name to a builder of a Scheduled evaluator from the run's config."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kitchen.engine.errors import ConfigError
from kitchen.workflows.common.evaluate import Scheduled
from train_core.evaluation.labels import LabelEvaluator


def _labels(cfg: Any) -> Scheduled:
    return Scheduled(LabelEvaluator(prefix="labels", max_tokens=cfg.sample_max_tokens),
                     cfg.evaluation.infrequent_every)  # fmt: skip


def _inspect(cfg: Any) -> Scheduled:
    """chat_sl's `inline_evals=inspect`: the shipped offline inspect tasks (the cookbook runs
    inspect_evals' gsm8k and ifeval, which need the network), greedy."""
    from cookbook.evals.inspect_tasks import inspect_tasks
    from train_core.evaluation.inspect_evaluator import InspectEvaluator

    tasks = inspect_tasks(["pip_signoff", "pip_tools"])
    evaluator = InspectEvaluator(tasks=tasks, limit=cfg.inline_eval_limit,
                                 max_tokens=cfg.sample_max_tokens)  # fmt: skip
    return Scheduled(evaluator, cfg.evaluation.infrequent_every)


INLINE_EVALS: dict[str, Callable[[Any], Scheduled]] = {"labels": _labels, "inspect": _inspect}


def inline_evaluators(cfg: Any, names: list[str]) -> list[Scheduled]:
    """The scheduled evaluators `names` picks from INLINE_EVALS, each built from cfg."""
    unknown = [n for n in names if n not in INLINE_EVALS]
    if unknown:
        raise ConfigError(
            f"inline_evals: unknown evaluator {unknown[0]!r}; expected one of {sorted(INLINE_EVALS)}"
        )
    return [INLINE_EVALS[n](cfg) for n in names]
