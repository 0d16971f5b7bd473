"""A failed request ends a run with one line naming the call: no InvalidStateError from a future
whose waiter was cancelled, no "Task exception was never retrieved", no SDK log line per request."""

from __future__ import annotations

import concurrent.futures
import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from kitchen.adapters.tinker.futures import wrap
from kitchen.engine.errors import BackendError

from .conftest import TEST_KEY, TINY

pytestmark = pytest.mark.slow  # each test runs kitchen in a process of its own

# rl_basic whose 4th sample request carries a seed no server takes: that group fails while the
# other groups' requests are in flight, so kitchen cancels them as they finish or fail.
CHILD = textwrap.dedent(
    """
    import itertools, sys
    import kitchen.workflows.common.seeding as seeding
    from kitchen.app.cli import main

    original, count = seeding.SeededSampler.sample, itertools.count()

    def sample(self, prompt, num_samples, sampling_params, **kwargs):
        if next(count) == 3:
            sampling_params = sampling_params.model_copy(update={"seed": 2**64})
        return original(self, prompt, num_samples, sampling_params, **kwargs)

    seeding.SeededSampler.sample = sample
    sys.argv = ["kitchen", "run", "rl_basic", *sys.argv[1:]]
    main()
    """
)


@pytest.mark.parametrize("backend", ["local", "tinker"])
def test_a_failed_sample_ends_the_run_with_one_line(
    backend: str, server_url: str, tmp_path: Path
) -> None:
    args = [f"--backend={backend}", f"model_name={TINY}", f"base_url={server_url}"]
    args += ["group_size=4", "groups_per_batch=4", "max_tokens=32", "coalesce_samples=false"]
    args += ["--max-steps", "2", "--log-dir", str(tmp_path), "--no-progress"]
    env = {**os.environ, "TINKER_API_KEY": TEST_KEY, "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, *args], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 1, done.stderr
    lines = [line for line in done.stderr.splitlines() if "seed is 18446744073709551616" in line]
    prefix = "error: tinker sample: " if backend == "tinker" else "error: sample: "
    assert len(lines) == 1 and lines[0].startswith(prefix), done.stderr
    for noise in ("InvalidStateError", "never retrieved", "Traceback", "exception calling"):
        assert noise not in done.stderr, done.stderr


class _SDKFuture:
    """What wrap() takes: an object whose .future() is the SDK's concurrent future."""

    def __init__(self) -> None:
        self.inner: concurrent.futures.Future[Any] = concurrent.futures.Future()

    def future(self) -> concurrent.futures.Future[Any]:
        return self.inner


def test_cancelling_a_wrapped_future_cancels_the_sdk_request() -> None:
    sdk = _SDKFuture()
    wrapped = wrap(lambda: sdk, "sample")
    wrapped._inner.cancel()
    assert sdk.inner.cancelled()


def test_a_request_failing_after_its_waiter_gave_up_logs_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    sdk = _SDKFuture()
    sdk.inner.set_running_or_notify_cancel()  # already sent: the SDK cannot cancel it any more
    wrapped = wrap(lambda: sdk, "sample")
    with caplog.at_level(logging.DEBUG):
        wrapped._inner.cancel()
        sdk.inner.set_exception(RuntimeError("HTTP 400"))
    assert wrapped._inner.cancelled()
    assert caplog.records == []


def test_a_failed_request_is_one_backend_error_naming_the_call() -> None:
    sdk = _SDKFuture()
    wrapped = wrap(lambda: sdk, "sample")
    sdk.inner.set_exception(RuntimeError("HTTP 400"))
    with pytest.raises(BackendError, match=r"^tinker sample: RuntimeError: HTTP 400$"):
        wrapped.result()
