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


INLINE_EVALS: dict[str, Callable[[Any], Scheduled]] = {"labels": _labels}


def inline_evaluators(cfg: Any, names: list[str]) -> list[Scheduled]:
    """The scheduled evaluators `names` picks from INLINE_EVALS, each built from cfg."""
    unknown = [n for n in names if n not in INLINE_EVALS]
    if unknown:
        raise ConfigError(
            f"inline_evals: unknown evaluator {unknown[0]!r}; expected one of {sorted(INLINE_EVALS)}"
        )
    return [INLINE_EVALS[n](cfg) for n in names]
