"""Optional engines load only for the option that needs them: a plain `kitchen run` imports
neither bitsandbytes (the 4-bit base; peft imports it wherever it is installed, and it prints a
warning about a package of its own) nor the vLLM adapter (`--sampler vllm`), and a 4-bit base
asked for later in the same process still gets bitsandbytes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import engine_device

from .test_quantization import needs_nf4

# A fresh interpreter runs `kitchen run ARGS` in-process, then names the optional modules it imported.
PROBE = """
import atexit, json, sys
from kitchen.app.cli import main

def loaded():
    names = [m for m, module in sys.modules.items() if module is not None]
    optional = [m for m in names if m.split(".")[0] == "bitsandbytes" or m.startswith("kitchen.adapters.vllm")]
    print("LOADED " + json.dumps(sorted(optional)))

atexit.register(loaded)
sys.argv = ["kitchen", *json.loads(sys.argv[1])]
main()
"""


def run_in_fresh_process(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, timeout=600
    )


@pytest.mark.slow  # launches a process
def test_a_plain_run_loads_no_optional_engine_and_prints_no_warning_of_theirs(tmp_path: Path):
    argv = ["run", "sl_basic", "--model", "kitchen/tiny-llama", "--max-steps", "1"]
    argv += ["--log-dir", str(tmp_path / "run")]
    done = run_in_fresh_process(PROBE, json.dumps(argv))
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-3000:]
    assert (tmp_path / "run" / "metrics.jsonl").exists()
    (line,) = [x for x in done.stdout.splitlines() if x.startswith("LOADED ")]
    assert json.loads(line.removeprefix("LOADED ")) == []
    for warning in ("kernels-community", "pip install kernels", "gemm_4bit"):
        assert warning not in output


NF4_AFTER_PLAIN = """
import sys
from kitchen.adapters.local import create_local_backend
from kitchen.ports import BackendSettings
from tinker import types

def backend(extra):
    return create_local_backend(BackendSettings(log_dir=sys.argv[1], seed=0, dtype="float32", device=sys.argv[2], extra=extra))

plain = backend({})
plain.create_lora_training_client("kitchen/tiny-llama", rank=4)  # peft imported without bitsandbytes
assert sys.modules["bitsandbytes"] is None
plain.close()
nf4 = backend({"base_quantization": "nf4"})
client = nf4.create_lora_training_client("kitchen/tiny-llama", rank=4)
import bitsandbytes as bnb
quantized = [m for m in client.host.base.modules() if isinstance(m, bnb.nn.Linear4bit)]
datum = types.Datum(
    model_input=types.ModelInput.from_ints([3, 10, 20, 30]),
    loss_fn_inputs={"target_tokens": [10, 20, 30, 40], "weights": [1.0, 1.0, 1.0, 1.0]},
)
loss = client.forward_backward([datum], "cross_entropy").result().metrics["loss:sum"]
lora = [n for n, _ in client.host.base.named_modules() if n.endswith("q_proj.base_layer")]
print("NF4", len(quantized), len(lora), loss > 0)
nf4.close()
"""


@pytest.mark.slow  # launches a process
@needs_nf4
def test_a_4bit_base_after_a_plain_one_in_one_process_gets_bitsandbytes(tmp_path: Path):
    done = run_in_fresh_process(NF4_AFTER_PLAIN, str(tmp_path), engine_device())
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    # Every attention and MLP projection of the 4 decoder layers is 4-bit, and LoRA wraps them.
    assert "NF4 28 4 True" in done.stdout
