"""The SandboxFusion adapter against a fake run_code service on 127.0.0.1."""

from __future__ import annotations

import asyncio
import base64
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from cookbook.envs.sandbox_grading import StdioCase, grade_stdio
from kitchen.adapters.sandbox import make_sandbox
from kitchen.adapters.sandbox.http import HttpSandbox
from kitchen.ports.sandbox import Limits, SandboxPort


def _finished(code: int, stdout: str = "", stderr: str = "") -> dict[str, Any]:
    status = "Success" if code == 0 else "Failed"
    run = {
        "status": "Finished",
        "execution_time": 0.05,
        "return_code": code,
        "stdout": stdout,
        "stderr": stderr,
    }
    return {"status": status, "message": "", "compile_result": None, "run_result": run, "files": {}}


def fake_service(request: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """A few canned behaviours keyed on the program text, plus an echo that proves the request
    shape: stdin comes back upper-cased, files are listed with their decoded contents."""
    code = request["code"]
    if code == "tle":
        return 200, {
            "status": "Failed",
            "message": "",
            "run_result": {
                "status": "TimeLimitExceeded",
                "execution_time": request["run_timeout"],
                "return_code": None,
            },
        }
    if code == "oom":
        return 200, _finished(1, stderr="Traceback...\nMemoryError\n")
    if code == "segv":
        return 200, _finished(-11)
    if code == "broken":
        return 200, {"status": "SandboxError", "message": "runner crashed", "run_result": None}
    if code == "http500":
        return 500, {"detail": "internal"}
    if code == "flood":
        return 200, _finished(0, stdout="x" * 5000)
    files = {k: base64.b64decode(v).decode() for k, v in request["files"].items()}
    echo = {
        "stdin": request["stdin"].upper(),
        "files": files,
        "language": request["language"],
        "run_timeout": request["run_timeout"],
        "memory_limit_MB": request["memory_limit_MB"],
    }
    if code == "answer":
        return 200, _finished(0, stdout=str(sum(map(int, request["stdin"].split()))) + "\n")
    return 200, _finished(0, stdout=json.dumps(echo))


@pytest.fixture(scope="module")
def service_url() -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            assert self.path == "/run_code"
            request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            status, body = fake_service(request)
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/run_code"
    server.shutdown()
    server.server_close()


def test_request_carries_program_stdin_files_and_limits(service_url):
    box = HttpSandbox(service_url)
    assert isinstance(box, SandboxPort)
    result = box.run(
        "echo", stdin="abc", files={"lib/util.py": "X = 1"}, limits=Limits(wall_s=7, memory_mb=300)
    )
    assert result.reason == "ok" and result.exit_code == 0
    assert json.loads(result.stdout) == {
        "stdin": "ABC",
        "files": {"lib/util.py": "X = 1"},
        "language": "python",
        "run_timeout": 7.0,
        "memory_limit_MB": 300,
    }
    assert result.cpu_s is None and result.peak_memory_mb is None  # the service does not say


def test_service_verdicts_map_to_reasons(service_url):
    box = HttpSandbox(service_url)
    assert box.run("tle").reason == "timeout"
    assert box.run("oom").reason == "memory"
    segv = box.run("segv")
    assert segv.reason == "killed" and segv.exit_code == 139
    broken = box.run("broken")
    assert broken.reason == "sandbox_error" and "runner crashed" in broken.stderr
    failed = box.run("http500")
    assert failed.reason == "sandbox_error" and "HTTP 500" in failed.stderr
    flood = box.run("flood", limits=Limits(max_output_bytes=1000))
    assert flood.reason == "output_limit" and flood.stdout_truncated and len(flood.stdout) == 1000


def test_unreachable_service_is_a_sandbox_error():
    box = make_sandbox("http", url="http://127.0.0.1:9/run_code")  # discard port: nothing listens
    result = box.run("print(1)")
    assert result.reason == "sandbox_error" and "unreachable" in result.stderr


def test_sandbox_url_environment_variable(service_url, monkeypatch):
    monkeypatch.setenv("SANDBOX_URL", service_url)
    monkeypatch.setenv("SANDBOX_MAX_CONCURRENCY", "3")
    box = make_sandbox("http")
    assert isinstance(box, HttpSandbox) and box.url == service_url and box.max_concurrency == 3
    report = asyncio.run(
        grade_stdio(
            box, "answer", [StdioCase(input="1 2", output="3"), StdioCase(input="2 2", output="5")]
        )
    )
    assert [c.passed for c in report.cases] == [True, False]
