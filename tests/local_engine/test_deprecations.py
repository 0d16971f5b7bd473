"""No library deprecation comes from kitchen's own calls while the local engine samples, trains and
scores: a FutureWarning or DeprecationWarning today is an error at the library's next major
release (transformers 5.24 renamed the forward's `past_key_values` to `cache`, and 5.40 drops the
old name), so it fails here first, whatever pyproject's filters hide from everything else."""

from __future__ import annotations

import logging
import traceback
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tinker import types

from .conftest import TINY
from .test_shared_prefix import group_data

ROOT = Path(__file__).resolve().parents[2]
OURS = tuple(f"{ROOT / package}/" for package in ("kitchen", "train_core", "cookbook"))
DEPRECATIONS = (DeprecationWarning, FutureWarning)


def our_caller() -> str | None:
    """The innermost kitchen, train_core or cookbook frame on the current thread's stack."""
    for frame in reversed(traceback.extract_stack()):
        if frame.filename.startswith(OURS):
            return f"{Path(frame.filename).relative_to(ROOT)}:{frame.lineno}"
    return None


@contextmanager
def deprecations_from_our_calls() -> Iterator[list[str]]:
    """Every FutureWarning and DeprecationWarning raised, on any thread, while our code is on the
    stack (a library's warning names the library's own frame, so the stack decides), shown every
    time whatever the filters outside say; and transformers' logged deprecation notices, which it
    gives once per process (its once-cache is cleared so an earlier test cannot have used it up)."""
    found: list[str] = []

    def show(message: Any, category: type[Warning], filename: str, lineno: int, *_: Any) -> None:
        caller = our_caller()
        if issubclass(category, DEPRECATIONS) and caller:
            found.append(f"{category.__name__} from {caller} ({filename}:{lineno}): {message}")

    class Notices(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            caller = our_caller()
            if "deprecat" in record.getMessage().lower() and caller:
                found.append(f"transformers log from {caller}: {record.getMessage()}")

    once = getattr(logging.Logger, "warning_once", None)  # transformers' patch: a functools cache
    if once is not None:
        once.cache_clear()
    notices = Notices(logging.WARNING)
    logger = logging.getLogger("transformers")
    logger.addHandler(notices)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("always")
            warnings.showwarning = show
            yield found
    finally:
        logger.removeHandler(notices)


def test_the_catcher_sees_a_library_deprecation_only_under_our_calls() -> None:
    def library() -> None:
        warnings.warn("old name", DeprecationWarning, stacklevel=2)

    with deprecations_from_our_calls() as found:
        library()  # called from a test: not ours
    assert found == []
    ours = compile("library()", str(ROOT / "kitchen" / "caller.py"), "exec")  # a frame of ours
    with deprecations_from_our_calls() as found:
        exec(ours, {"library": library})
    assert len(found) == 1 and "old name" in found[0] and "kitchen/caller.py:1" in found[0]


def test_sampling_training_and_scoring_raise_no_deprecation(backend: Any) -> None:
    with deprecations_from_our_calls() as found:
        sampler = backend.create_sampling_client(base_model=TINY)
        # Prompts of different lengths, submitted together: one left-padded prefill, then decode
        # steps over a cache whose rows carry padding.
        prompts = [[5, 17, 42, 99, 7, 300, 12], [8, 9], [5, 17, 42, 99, 7, 300, 12, 14, 15]]
        params = types.SamplingParams(max_tokens=6, seed=3, stop=[])
        futures = [sampler.sample(types.ModelInput.from_ints(p), 2, params) for p in prompts]
        assert all(len(f.result().sequences) == 2 for f in futures)
        assert len(sampler.compute_logprobs(types.ModelInput.from_ints(prompts[0])).result()) == 7
        client = backend.create_lora_training_client(TINY, rank=4)
        # Rows sharing a prompt: the shared-prefix pass hands its cache to the rows' own pass.
        fb = client.forward_backward(group_data("importance_sampling"), "importance_sampling")
        client.optim_step(types.AdamParams(learning_rate=1e-3)).result()
        assert fb.result().metrics
    assert not found, "\n".join(found)
