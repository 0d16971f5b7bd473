"""EleutherAI lm-eval-harness against `kitchen serve` on the shipped offline tasks: scoring
(local-completions, loglikelihood) and generation (local-chat-completions)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.tinker_backend.conftest import TINY

lm_eval = pytest.importorskip("lm_eval", reason="lm-eval-harness: pip install 'kitchen[eval]'")
TASKS = Path(__file__).resolve().parents[2] / "cookbook" / "data" / "eval_tasks"


def _evaluate(model: str, model_args: dict[str, object], task: str, **kwargs: object) -> dict:
    from lm_eval.tasks import TaskManager

    manager = TaskManager(include_path=str(TASKS), include_defaults=False)
    args = {**model_args, "model": TINY, "max_retries": 1}
    out = lm_eval.simple_evaluate(
        model=model, model_args=args, tasks=[task], task_manager=manager, limit=8, **kwargs
    )
    return out["results"][task]


def test_local_completions_scores_multiple_choice(server_url: str) -> None:
    from kitchen.adapters.local import resolve_model

    result = _evaluate(
        "local-completions",
        {
            "base_url": f"{server_url}/v1/completions",
            "tokenizer_backend": "huggingface",
            "tokenizer": str(resolve_model(TINY)),
        },
        "pip_mc",
    )
    assert result["sample_len"] == 8
    assert 0.0 <= result["acc,none"] <= 1.0


def test_local_chat_completions_generates(server_url: str) -> None:
    result = _evaluate(
        "local-chat-completions",
        {"base_url": f"{server_url}/v1/chat/completions"},
        "pip_chat",
        apply_chat_template=True,
    )
    assert result["sample_len"] == 8
    assert result["signed_off,none"] == 0.0  # an untrained tiny model never signs off as Pip
