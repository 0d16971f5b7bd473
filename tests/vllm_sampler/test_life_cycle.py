"""The life of a vLLM server Kitchen starts, with a stand-in process (fake_vllm.py run as a script
through a stand-in environment's `python`): a progress line while it loads, a bounded wait, one
line when it dies, and every process of it stopped at the end."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from tinker import types

from kitchen.adapters.vllm.samplers import VllmSamplers, VllmSettings
from kitchen.adapters.vllm.server import ServerSpec, StartedServer, find_python
from kitchen.engine.errors import BackendError, ConfigError

FAKE = Path(__file__).with_name("fake_vllm.py")


def stand_in_env(tmp_path: Path, script: str) -> Path:
    """A folder shaped like a venv whose bin/python runs `script` instead of vLLM."""
    python = tmp_path / "env" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(f"#!/bin/sh\n{script}\n")
    python.chmod(0o755)
    return tmp_path / "env"


def fake_server_env(tmp_path: Path) -> Path:
    # The stand-in also starts a child, as vLLM starts its engine: stop() must reach it too.
    root = Path(__file__).parents[2]
    return stand_in_env(
        tmp_path,
        f"sleep 300 & echo $! > {tmp_path}/child.pid\n"
        f'PYTHONPATH={root} exec {sys.executable} {FAKE} "$@"',
    )


def spec(tmp_path: Path, env: Path) -> ServerSpec:
    return ServerSpec(
        model_path=tmp_path / "model",
        dtype="float32",
        max_lora_rank=8,
        max_model_len=64,
        python=find_python(str(env)),
        log_path=tmp_path / "vllm.log",
    )


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is gone for every purpose here.
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split()[2] == "Z")


def gone(pid: int) -> bool:
    """Whether `pid` ends within 10 s (a killed process takes a moment to be reaped)."""
    for _ in range(100):
        if not alive(pid):
            return True
        time.sleep(0.1)
    return False


def test_start_shows_progress_waits_until_ready_and_stop_kills_every_process(tmp_path):
    lines: list[tuple[str, bool]] = []
    server = StartedServer(spec(tmp_path, fake_server_env(tmp_path)), lambda *a: lines.append(a))
    try:
        server.wait_ready(timeout_s=60)
        assert server.alive()
    finally:
        server.stop()
    assert lines[0][0].startswith("vLLM: loading model (") and not lines[0][1]
    assert lines[-1][1] and "ready in" in lines[-1][0] and server.url in lines[-1][0]
    child = int(Path(tmp_path / "child.pid").read_text())
    assert gone(child) and not server.alive()
    # vLLM's arguments: the runtime LoRA loading and Tinker's logprobs are asked for.
    command = spec(tmp_path, tmp_path / "env").command(8000)
    assert command[1:3] == ["-m", "vllm.entrypoints.openai.api_server"]
    assert "processed_logprobs" in command and "--enable-lora" in command
    assert command[command.index("--max-lora-rank") + 1] == "8"
    assert spec(tmp_path, tmp_path / "env").environment()["VLLM_ALLOW_RUNTIME_LORA_UPDATING"]
    # On a CPU, prompts are never split over steps (server.py says why).
    assert "--no-enable-chunked-prefill" not in command
    cpu = ServerSpec(**{**spec(tmp_path, tmp_path / "env").__dict__, "cpu": True}).command(8000)
    assert "--no-enable-chunked-prefill" in cpu


def test_a_server_that_exits_while_loading_is_one_line_with_its_last_words(tmp_path):
    env = stand_in_env(tmp_path, "echo 'ValueError: no CPU backend for this model'; exit 3")
    server = StartedServer(spec(tmp_path, env), lambda *a: None)
    with pytest.raises(BackendError) as died:
        server.wait_ready(timeout_s=60)
    line = str(died.value)
    assert "\n" not in line and "status 3" in line and "no CPU backend" in line


def test_a_server_that_never_answers_is_stopped_after_the_timeout(tmp_path):
    env = stand_in_env(tmp_path, "exec sleep 300")
    server = StartedServer(spec(tmp_path, env), lambda *a: None)
    pid = server.proc.pid
    started = time.monotonic()
    with pytest.raises(BackendError, match="did not answer within 2 s"):
        server.wait_ready(timeout_s=2)
    assert time.monotonic() - started < 30
    assert gone(pid)


def test_no_vllm_environment_is_one_line_saying_how_to_get_one(tmp_path):
    with pytest.raises(ConfigError, match="make vllm") as missing:
        find_python(str(tmp_path / "nowhere"))
    assert "\n" not in str(missing.value)


def test_samplers_start_the_server_when_training_starts_and_stop_it_on_close(tmp_path, monkeypatch):
    monkeypatch.setenv("KITCHEN_CACHE", str(tmp_path / "cache"))
    env = fake_server_env(tmp_path)
    lines: list[tuple[str, bool]] = []
    samplers = VllmSamplers(
        VllmSettings(env=str(env)),
        dtype="float32",
        checkpoint_root=tmp_path / "run" / "checkpoints",
        seed=0,
        say=lambda *a: lines.append(a),
    )
    host = SimpleNamespace(
        model_path=tmp_path / "model",
        model_name="m",
        tokenizer=None,
        vocab_size=1090,
        max_context=64,
    )
    samplers.start(host, max_lora_rank=8)
    try:
        client = samplers.sampling_client(host, None, None, [2], scorer=None)
        out = client.sample(types.ModelInput.from_ints([1]), 1, types.SamplingParams(max_tokens=2))
        assert out.result().sequences[0].tokens == [2]  # token 2 is EOS: stopped there
    finally:
        samplers.close()
    (started,) = samplers._bases.values() if samplers._bases else [None]
    assert started is None  # close forgot it
    assert any("ready in" in line for line, _ in lines)
    (log,) = (tmp_path / "cache" / "vllm-logs").iterdir()
    assert "fake vLLM: serving" in log.read_text()
    assert gone(int((tmp_path / "child.pid").read_text()))


def test_a_started_server_that_dies_later_is_one_line_with_the_error_from_its_log(tmp_path):
    from kitchen.adapters.vllm.pool import ServerPool
    from kitchen.adapters.vllm.server import health

    die = tmp_path / "die"
    env = stand_in_env(
        tmp_path,
        f'PYTHONPATH={Path(__file__).parents[2]} {sys.executable} {FAKE} "$@" & FAKE=$!\n'
        f"while [ ! -e {die} ]; do sleep 0.1; done\n"
        "echo 'RuntimeError: einsum(): subscript b has size 2'; echo 'INFO: Finished server'\n"
        "kill $FAKE; exec sleep 300",
    )
    server = StartedServer(spec(tmp_path, env), lambda *a: None)
    try:
        server.wait_ready(timeout_s=60)
        pool = ServerPool([server.url], 30.0, server.explain)
        die.touch()
        for _ in range(100):
            if not health(server.url, timeout_s=1):
                break
            time.sleep(0.1)
        body = {"model": "kitchen-base", "prompt": [1], "n": 1, "max_tokens": 1}
        with pytest.raises(BackendError) as died:
            pool.post("/v1/completions", body).result(timeout=30)
        pool.close()
    finally:
        server.stop()
    line = str(died.value)
    assert "\n" not in line and "vLLM's log says: RuntimeError: einsum()" in line
    assert str(tmp_path / "vllm.log") in line and "--resume" in line
