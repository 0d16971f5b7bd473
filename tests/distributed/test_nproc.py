"""`kitchen run RECIPE --nproc 2`: two gloo ranks on this CPU, the base sharded with FSDP2, give the
run one process gives: the same metrics.jsonl losses and the same final adapter. sl_basic trains
with a built-in loss, dpo with forward_backward_custom (rank 0 scores, every rank backpropagates)."""

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from safetensors.numpy import load_file
from typer.testing import CliRunner

import kitchen
from kitchen.adapters.local.distributed.relaunch import Launch, relaunch
from kitchen.app import rank_flags
from kitchen.app.cli import app
from kitchen.engine.errors import ConfigError
from tests.helpers import chat_files
from tests.preference_workflow.helpers import comparison, write_jsonl
from tests.tinker_backend.conftest import free_port

# Each launch of two ranks costs 15-40 s here, most of it imports.
launches = pytest.mark.slow

LOSS_KEYS = ("train_mean_nll", "dpo_loss", "unclipped_grad_l2:mean", "kl_policy_base")


# sl_basic runs the engine's other paths at N=2 (dpo and rl_basic run float32, padded, without
# checkpointing): bf16 autocast, packed rows, activations recomputed in backward.
ENGINE_PATHS = {"dtype": "bfloat16", "packing": True, "activation_checkpointing": "on"}


def _sl_basic_args(data: str, log_dir: Path) -> list[str]:
    # 3 steps of 8 chats in 64-token micro-batches: several passes a step, dealt to both ranks.
    return ["run", "sl_basic", "-m", "kitchen/tiny-llama", "-d", data, "-b", "8",
            "--max-steps", "3", "--log-dir", str(log_dir), "--no-progress", "--no-register",
            "--test-dataset", "None", "--learning-rate", "1e-2", "--save-every", "3",
            "--dtype", "bfloat16", "--packing", "--activation-checkpointing", "on"]  # fmt: skip


def _losses(log_dir: Path) -> list[dict[str, float]]:
    rows = [json.loads(line) for line in (log_dir / "metrics.jsonl").read_text().splitlines()]
    return [{k: r[k] for k in LOSS_KEYS if k in r} for r in rows if "unclipped_grad_l2:mean" in r]


def _dpo_args(data: str, log_dir: Path) -> list[str]:
    # 3 steps of 2 pairs in 48-token micro-batches: several passes a step.
    return ["run", "dpo", "-m", "kitchen/tiny-llama", "-d", data, "--max-steps", "3",
            "--log-dir", str(log_dir), "--no-progress", "--no-register", "batch_size=4",
            "learning_rate=1e-2", "lora_rank=8", "save_every=0", "dpo_beta=0.5"]  # fmt: skip


@launches
def test_sl_basic_on_two_ranks_equals_one(tmp_path, monkeypatch):
    """The two ranks are started from Python: kitchen.run(nproc=2) runs what `kitchen run
    --nproc 2` runs, and its result is read back from the run directory."""
    monkeypatch.setenv("KITCHEN_MICROBATCH_TOKENS", "64")
    data, _ = chat_files(tmp_path)

    def from_python(log_dir: Path) -> None:
        values = {"model_name": "kitchen/tiny-llama", "dataset": data, "batch_size": 8,
                  "register_model": False, "test_dataset": None, "learning_rate": 1e-2,
                  "save_every": 3, **ENGINE_PATHS}  # fmt: skip
        result = kitchen.run("sl_basic", values, log_dir=log_dir, max_steps=3, nproc=2)
        assert result.steps == result.state.step == 3
        assert [r["step"] for r in result.metrics if "train_mean_nll" in r] == [0, 1, 2]

    _same_on_two_ranks(tmp_path, lambda log_dir: _sl_basic_args(data, log_dir), from_python)


def _rl_basic_args(log_dir: Path) -> list[str]:
    # The tiny model earns one constant reward; the KL penalty makes the advantages (and so the
    # update) depend on every sampled token and on the reference logprobs. Two groups of 4 in
    # 32-token micro-batches: shared-prefix passes, dealt to both ranks.
    return ["run", "rl_basic", "-m", "kitchen/tiny-llama", "--log-dir", str(log_dir),
            "--no-progress", "--no-register", "group_size=4", "groups_per_batch=2", "max_tokens=6",
            "num_batches=3", "kl_penalty_coef=0.5", "remove_constant_reward_groups=false",
            "num_test_problems=0", "eval_every=0", "learning_rate=1e-2", "lora_rank=8"]  # fmt: skip


@launches
def test_rl_basic_on_two_ranks_equals_one(tmp_path, monkeypatch):
    """Every rank takes part in sampling (--spread-sampling: each rank decodes one of the two
    groups; without it, rank 0 decodes both, which test_serve_nproc.py runs) and in the
    reference scoring (dealt); every rank trains. The sampled tokens are those of one process. Both runs are processes under MKL_CBWR=AUTO,STRICT: MKL's matrix
    products otherwise differ in the last bits with the alignment of their operands, and the
    ranks compute from gathered weights in other memory than one process (without it the
    adapter moved by 1.8e-6 after 3 steps, the sampled tokens unchanged). The two groups'
    requests, gathered, start decoding together on both sides (compute_thread.py): when the
    compute thread could start the first alone and pad the second in a step later, the step-0
    sampled logprobs moved in the last bits, the KL-only advantage with them, and about one run
    in a few (either N) trained another adapter and sampled other tokens from the second batch."""
    monkeypatch.setenv("KITCHEN_MICROBATCH_TOKENS", "96")
    monkeypatch.setenv("MKL_CBWR", "AUTO,STRICT")
    _same_on_two_ranks(tmp_path, _rl_basic_args, one_in_a_process=True, spread=True)
    sampled = [_sampled_tokens(tmp_path / run) for run in ("nproc1", "nproc2")]
    assert len(sampled[0]) == 3 * 2 * 4 and sampled[1] == sampled[0]


def _sampled_tokens(log_dir: Path) -> list[list[str]]:
    """Every sampled response's tokens, in order, from the run's rollout transcripts."""
    return [
        turn["tokens"]
        for path in sorted((log_dir / "rollouts").glob("iter_*.jsonl"))
        for group in map(json.loads, path.read_text().splitlines())
        for trajectory in group["trajectories"]
        for turn in trajectory["turns"]
    ]


@launches
def test_dpo_on_two_machines_equals_one_process(tmp_path, monkeypatch):
    """The two ranks are two machines of one rank each (--nnodes 2, here both on this one): the
    same command started twice, with --node-rank 0 and 1, meeting at --rdzv-endpoint."""
    monkeypatch.setenv("KITCHEN_MICROBATCH_TOKENS", "48")
    rows = [comparison(i, label="A" if i % 2 else "B") for i in range(12)]
    data = str(write_jsonl(tmp_path / "prefs.jsonl", rows))

    def two_machines(log_dir: Path) -> None:
        machines = ["--nproc", "1", "--nnodes", "2", "--rdzv-endpoint", f"127.0.0.1:{free_port()}"]
        command = [sys.executable, "-m", "kitchen.app.cli", *_dpo_args(data, log_dir), *machines]
        commands = [[*command, "--node-rank", str(node)] for node in (0, 1)]
        nodes = [subprocess.Popen(c, stdout=subprocess.PIPE, text=True) for c in commands]
        outputs = [node.communicate(timeout=300)[0] for node in nodes]
        assert [node.returncode for node in nodes] == [0, 0]
        assert "done: 3 steps" in outputs[0]  # the recipe runs on machine 0

    _same_on_two_ranks(tmp_path, lambda log_dir: _dpo_args(data, log_dir), two_machines)


def _same_on_two_ranks(
    tmp_path: Path,
    args: Callable[[Path], list[str]],
    two_ranks: Callable[[Path], None] | None = None,
    one_in_a_process: bool = False,
    spread: bool = False,
) -> None:
    """`kitchen *args` run in one process and on two ranks (or by `two_ranks`) give the same
    losses and final adapter."""
    one, two = tmp_path / "nproc1", tmp_path / "nproc2"
    if one_in_a_process:
        assert "done: 3 steps" in _launch([*args(one), "--nproc", "1"])
    else:
        result = CliRunner().invoke(app, args(one))
        assert result.exit_code == 0, result.output
    if two_ranks is None:
        spreading = ["--spread-sampling"] if spread else []
        assert "done: 3 steps" in _launch([*args(two), "--nproc", "2", *spreading])
    else:
        two_ranks(two)
    expected, got = _losses(one), _losses(two)
    assert len(expected) == 3 and [r.keys() for r in got] == [r.keys() for r in expected]
    for want, have in zip(expected, got, strict=True):
        for key in want:
            assert have[key] == pytest.approx(want[key], rel=1e-5), key
    _assert_same_adapter(one, two)


def _launch(args: list[str]) -> str:
    """`kitchen *args` in a new process (with this environment); its stdout."""
    launched = subprocess.run(
        [sys.executable, "-m", "kitchen.app.cli", *args],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert launched.returncode == 0, launched.stderr[-3000:]
    return launched.stdout


def _assert_same_adapter(one: Path, two: Path, atol: float = 1e-6) -> None:
    final = "checkpoints/weights/final/adapter_model.safetensors"
    a, b = load_file(one / final), load_file(two / final)
    assert a.keys() == b.keys() and a
    for key in a:
        np.testing.assert_allclose(b[key], a[key], rtol=0, atol=atol, err_msg=key)


def _children(pid: int) -> list[int]:
    return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def _rank_of(pid: int) -> str:
    rank = _environ(pid, "RANK")
    assert rank is not None, pid
    return rank


def _environ(pid: int, key: str) -> str | None:
    """The value of `key` in the environment process `pid` started with."""
    env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    found = (e.split(b"=", 1)[1].decode() for e in env if e.startswith(key.encode() + b"="))
    return next(found, None)


def test_nproc_needs_the_local_engine():
    result = CliRunner().invoke(app, ["run", "sl_basic", "--backend", "fake", "--nproc", "2"])
    assert result.exit_code == 2
    assert "--nproc/--nnodes start ranks of the local engine; backend is 'fake'" in result.output


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({"nproc": 0}, "nproc (--nproc): expected a whole number >= 1, got 0"),
        ({"nproc": "2"}, "nproc (--nproc): expected a whole number >= 1, got '2'"),
        ({"nnodes": 2}, "nnodes (--nnodes) 2: the machines need rdzv_endpoint (--rdzv-endpoint)"),
        ({"nnodes": 2, "node_rank": 2, "rdzv_endpoint": "h:29500"}, "node_rank (--node-rank) 2"),
        (
            {"nnodes": 2, "rdzv_endpoint": "h"},
            "rdzv_endpoint (--rdzv-endpoint): expected host:port",
        ),
        ({"nproc": 2, "backend": "fake"}, "ranks are of the local engine; backend is 'fake'"),
        ({"nproc": 2, "hooks": [object()]}, "hooks cannot reach the ranks"),
        ({"nproc": 2}, "run(nproc=2, nnodes=1) needs a log_dir"),
    ],
)
def test_the_python_api_refuses_what_ranks_cannot_run(options, error, monkeypatch):
    """kitchen.run's nproc, nnodes, node_rank and rdzv_endpoint are `kitchen run`'s flags; a bad
    value or what cannot cross to the ranks is refused in one line, before any rank starts."""
    monkeypatch.setattr(rank_flags, "relaunch", lambda *a: pytest.fail("a rank was started"))
    with pytest.raises(ConfigError) as e:
        kitchen.run("sl_basic", {"register_model": False}, **options)
    assert error in str(e.value) and "\n" not in str(e.value)


def test_more_ranks_than_gpus_are_refused_before_any_starts(monkeypatch):
    """On CUDA each rank takes a GPU of its own (NCCL refuses two ranks on one)."""
    import torch
    import torch.distributed.run as launcher

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(launcher, "run", lambda *a: pytest.fail("a rank was started"))
    with pytest.raises(ConfigError) as e:
        relaunch(Launch(nproc=2), ["run", "sl_basic"], "kitchen.app.rank_entry")
    assert str(e.value) == (
        "nproc (--nproc) 2: ranks on CUDA take a GPU each and this machine has 1 visible: "
        "--nproc 1 at most, or CUDA_VISIBLE_DEVICES= to run the ranks on the CPU"
    )


def test_serve_refuses_bad_rank_flags_in_one_line():
    result = CliRunner().invoke(
        app, ["serve", "--nnodes", "2", "--rdzv-endpoint", "h:1", "--node-rank", "3"]
    )
    assert result.exit_code == 2
    assert result.output.strip() == (
        "error: node_rank (--node-rank) 3: expected below nnodes (2); machines count from 0"
    )


@launches
@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="finds the ranks in /proc")
def test_a_run_whose_rank_was_killed_or_stopped_resumes_at_any_nproc(tmp_path, monkeypatch):
    """Step 1 in one process; resumed at --nproc 2, rank 1 killed with SIGKILL once the step-2
    checkpoint is recorded; resumed at --nproc 2, rank 1 stopped with SIGSTOP once the step-4
    checkpoint is recorded (steps 3 and 4 at N=2: a rank > 0 that resumed with other weights or
    Adam state than rank 0 shows only in the losses of the step after its first update); resumed
    in one process for step 5. Every step's losses and the final adapter are those of five steps
    in one process, bit for bit (only rank 0 writes checkpoints: the folder one process writes,
    with the world size that wrote it).

    The killed rank: the run exits 1 within seconds with one line naming the rank, and no rank is
    left running. The stopped rank (it neither dies nor answers), under a 5 s collective timeout:
    rank 0 names rank 1, whose heartbeat stopped, in the run's one error line, whether its
    collective timed out or gloo held it handing the next call on, and kills it (a stopped process
    cannot take the launcher's SIGTERM, which torch.distributed.run follows with SIGKILL only 30 s
    later): the run exits 1 within 30 s, and no rank is left. Either way nothing is written after
    the checkpoint the signal followed. (One test: each launch of two ranks costs 15-40 s here.)"""
    monkeypatch.setenv("KITCHEN_MICROBATCH_TOKENS", "64")
    data, _ = chat_files(tmp_path)
    one, split = tmp_path / "nproc1", tmp_path / "split"
    # 24 chats in batches of 8: step 4 is the first of the second epoch.
    five = ["--max-steps", "5", "num_epochs=2"]
    result = CliRunner().invoke(app, [*_sl_basic_args(data, one), *five])
    assert result.exit_code == 0, result.output
    resume = [*_sl_basic_args(data, split), "num_epochs=2", "--save-every", "1", "--resume"]
    result = CliRunner().invoke(app, [*resume, "--max-steps", "1"])
    assert result.exit_code == 0, result.output
    ranks = [*resume, "--max-steps", "5", "--nproc", "2"]

    code, seconds, err, left = _signal_rank_one(ranks, split, signal.SIGKILL, step=2)
    assert code == 1
    assert seconds < 60
    assert "error: rank 1 of 2 failed (exit code -9); every rank was stopped" in err
    assert not left, f"ranks left after kill -9 of rank 1: {left}"

    monkeypatch.setenv("KITCHEN_COLLECTIVE_TIMEOUT", "5")
    code, seconds, err, left = _signal_rank_one(ranks, split, signal.SIGSTOP, step=4)
    errors = [line for line in err.splitlines() if "error" in line.lower()]
    assert len(errors) == 1, err[-3000:]
    assert errors[0].startswith("error: rank 0 of 2: rank 1 stopped answering ("), errors
    assert code == 1
    assert seconds < 30
    assert not left, f"ranks left after SIGSTOP of rank 1: {left}"
    monkeypatch.delenv("KITCHEN_COLLECTIVE_TIMEOUT")

    records = [json.loads(line) for line in (split / "checkpoints.jsonl").read_text().splitlines()]
    meta = json.loads((Path(records[-1]["state_path"]) / "kitchen_checkpoint.json").read_text())
    assert (meta["step"], meta["world_size"]) == (4, 2)
    result = CliRunner().invoke(app, [*resume, "--max-steps", "5"])
    assert result.exit_code == 0, result.output
    resumed = re.findall(r"resuming \S+ from .*?step=(\d+)", (split / "logs.log").read_text())
    assert resumed == ["1", "2", "4"], resumed
    assert _losses(split) == _losses(one) and len(_losses(one)) == 5
    _assert_same_adapter(one, split, atol=0)


def _signal_rank_one(
    args: list[str], log_dir: Path, sig: signal.Signals, step: int
) -> tuple[int, float, str, list[int]]:
    """`kitchen *args` (a --nproc 2 run into `log_dir`) started, and `sig` sent to rank 1 as soon
    as checkpoints.jsonl records step `step`'s checkpoint and metrics.jsonl that step (before the
    next step's row, a resume would take the checkpoint before): the run's exit code, seconds from
    the signal to its end, its stderr, and the ranks still there after."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "kitchen.app.cli", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    records, metrics = log_dir / "checkpoints.jsonl", log_dir / "metrics.jsonl"
    ranks: dict[str, int] = {}
    try:
        deadline = time.monotonic() + 240
        while step not in _recorded_steps(records) or step - 1 not in _logged_steps(metrics):
            if proc.poll() is not None:
                said = proc.stderr.read() if proc.stderr else ""
                raise AssertionError(
                    f"exit {proc.returncode} before step {step}'s checkpoint: {said}"
                )
            assert time.monotonic() < deadline, f"no checkpoint of step {step} in 240 s"
            time.sleep(0.02)
        ranks = {_rank_of(pid): pid for pid in _children(proc.pid)}
        assert set(ranks) == {"0", "1"}, ranks
        # The launcher has glibc give freed blocks back (docs/distributed.md, Measured).
        assert {_environ(pid, "MALLOC_MMAP_THRESHOLD_") for pid in ranks.values()} == {"1048576"}
        os.kill(ranks["1"], sig)
        sent = time.monotonic()
        _, err = proc.communicate(timeout=120)
        seconds = time.monotonic() - sent
        left = [pid for pid in ranks.values() if Path(f"/proc/{pid}").exists()]
    finally:
        # Killing the launcher would leave its ranks running: they go first.
        for pid in list(ranks.values()) or (_children(proc.pid) if proc.poll() is None else []):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        proc.kill()
        proc.wait()
    # Nothing after the checkpoint: the signal landed before the next step's.
    assert max(_recorded_steps(records)) == step
    return proc.returncode, seconds, err, left


def _recorded_steps(records: Path) -> list[int]:
    """The steps of the checkpoints checkpoints.jsonl records (complete lines only)."""
    return [row["step"] for row in _complete_rows(records)]


def _logged_steps(metrics: Path) -> list[int]:
    """The steps metrics.jsonl has a training row of (complete lines only)."""
    return [row["step"] for row in _complete_rows(metrics) if "unclipped_grad_l2:mean" in row]


def _complete_rows(jsonl: Path) -> list[dict[str, Any]]:
    lines = jsonl.read_text().split("\n")[:-1] if jsonl.exists() else []
    return [json.loads(line) for line in lines]
