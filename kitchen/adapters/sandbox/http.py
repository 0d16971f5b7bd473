"""The HTTP sandbox: a SandboxFusion-compatible service (`SANDBOX_URL`), for scale.

SandboxFusion's `POST /run_code` takes {code, language, stdin, run_timeout, compile_timeout,
memory_limit_MB, files: {relative path: base64 content}} and answers {status: Success | Failed |
SandboxError, message, compile_result, run_result}, each result being {status: Finished | Error |
TimeLimitExceeded, return_code, stdout, stderr, execution_time}. tinker-cookbook's code_rl talks
to the same endpoint. The service reports neither CPU time nor peak memory: those stay None.
"""

from __future__ import annotations

import base64
import json
import os
import time
import urllib.error
import urllib.request
from typing import Any

from kitchen.adapters.sandbox.bounded import BoundedSandbox
from kitchen.adapters.sandbox.verdict import classify
from kitchen.ports.sandbox import ExecutionResult, Limits, Reason, check_file_name

DEFAULT_URL = "http://localhost:8080/run_code"
_STDERR_HEAD_CHARS = 64 * 1024
# No proxies from the environment: the service is local or in-cluster (aiohttp, which
# tinker-cookbook uses, ignores them too), and test servers on 127.0.0.1 must be reached directly.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class HttpSandbox(BoundedSandbox):
    """Client of a SandboxFusion service. `max_concurrency` (default SANDBOX_MAX_CONCURRENCY or
    4) bounds requests in flight; the service's own limits still apply on its side."""

    name = "http"

    def __init__(
        self,
        url: str | None = None,
        *,
        max_concurrency: int | None = None,
        limits: Limits | None = None,
        compile_timeout_s: float = 10.0,
        request_slack_s: float = 30.0,
    ) -> None:
        concurrency = max_concurrency or int(os.environ.get("SANDBOX_MAX_CONCURRENCY", "4"))
        super().__init__(concurrency, limits)
        self.url = url or os.environ.get("SANDBOX_URL") or DEFAULT_URL
        self.compile_timeout_s = compile_timeout_s
        self.request_slack_s = request_slack_s  # queueing and start-up on the service's side

    def payload(
        self, program: str, language: str, stdin: str, files: dict[str, str], limits: Limits
    ) -> dict[str, Any]:
        return {
            "code": program,
            "language": language,
            "stdin": stdin,
            # The service has only a wall clock, on its own machine (whose load is not ours):
            # the program's time limit is the closest it measures.
            "run_timeout": limits.cpu_limit_s,
            "compile_timeout": self.compile_timeout_s,
            "memory_limit_MB": limits.memory_mb,
            "files": {
                check_file_name(name): base64.b64encode(text.encode("utf-8")).decode("ascii")
                for name, text in files.items()
            },
        }

    def _execute(
        self, program: str, language: str, stdin: str, files: dict[str, str], limits: Limits
    ) -> ExecutionResult:
        body = json.dumps(self.payload(program, language, stdin, files, limits)).encode()
        request = urllib.request.Request(
            self.url, data=body, headers={"Content-Type": "application/json"}, method="POST"
        )
        t0 = time.monotonic()
        timeout = limits.wall_s + self.compile_timeout_s + self.request_slack_s
        try:
            with _OPENER.open(request, timeout=timeout) as response:
                data = json.loads(response.read())
        except urllib.error.HTTPError as e:
            detail = e.read().decode("utf-8", "replace")[:500]
            return _sandbox_error(f"sandbox service {self.url}: HTTP {e.code}: {detail}", t0)
        except (urllib.error.URLError, OSError, ValueError) as e:
            return _sandbox_error(f"sandbox service {self.url} unreachable or garbled: {e}", t0)
        return parse_response(data, limits, time.monotonic() - t0)


def _sandbox_error(message: str, t0: float) -> ExecutionResult:
    return ExecutionResult(
        exit_code=None,
        reason="sandbox_error",
        stderr=message,
        wall_s=round(time.monotonic() - t0, 4),
    )


def parse_response(data: dict[str, Any], limits: Limits, elapsed_s: float) -> ExecutionResult:
    """Map a SandboxFusion run_code response to an ExecutionResult."""
    if not isinstance(data, dict):
        return ExecutionResult(
            exit_code=None, reason="sandbox_error", stderr=f"bad reply {data!r}"[:500]
        )
    compile_result = data.get("compile_result") or {}
    run_result = data.get("run_result") or {}
    if data.get("status") == "SandboxError" or run_result.get("status") == "Error":
        message = data.get("message") or run_result.get("stderr") or "SandboxError"
        return ExecutionResult(
            exit_code=None,
            reason="sandbox_error",
            stderr=str(message)[:_STDERR_HEAD_CHARS],
            wall_s=elapsed_s,
        )
    if compile_result and (
        compile_result.get("status") != "Finished"
        or compile_result.get("return_code") not in (0, None)
    ):
        # A program that does not compile is the program's failure, not the sandbox's.
        return ExecutionResult(
            exit_code=compile_result.get("return_code"),
            reason="timeout"
            if compile_result.get("status") == "TimeLimitExceeded"
            else "runtime_error",
            stdout=compile_result.get("stdout") or "",
            stderr=(compile_result.get("stderr") or "")[:_STDERR_HEAD_CHARS],
            wall_s=float(compile_result.get("execution_time") or elapsed_s),
        )
    stdout = run_result.get("stdout") or ""
    stderr = run_result.get("stderr") or ""
    code = run_result.get("return_code")
    if isinstance(code, int) and code < 0:  # asyncio's convention for death by signal N
        code = 128 - code
    reason: Reason
    if len(stdout.encode()) + len(stderr.encode()) > limits.max_output_bytes:
        reason = "output_limit"
    elif run_result.get("status") == "TimeLimitExceeded":
        reason = "timeout"
    else:
        reason = classify(
            exit_code=code,
            started=code is not None,
            killed_for=None,
            stderr_tail=stderr[-4096:],
            cpu_s=None,
            cpu_limit_s=limits.cpu_limit_s,
        )
    stdout_bytes = stdout.encode()
    return ExecutionResult(
        exit_code=code,
        reason=reason,
        stdout=stdout_bytes[: limits.max_output_bytes].decode("utf-8", "ignore"),
        stderr=stderr[:_STDERR_HEAD_CHARS],
        stdout_truncated=len(stdout_bytes) > limits.max_output_bytes,
        stderr_truncated=len(stderr) > _STDERR_HEAD_CHARS,
        wall_s=round(float(run_result.get("execution_time") or elapsed_s), 4),
    )
