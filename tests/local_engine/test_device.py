"""Tensors are made where the engine computes, and the engine does not wait on the device mid-way.

On a CUDA machine a tensor or random generator made without naming its device lands on the CPU and
fails against the model's (32 engine tests did, 2026-11-26); a value read back from the device
(float(t), .item(), nonzero, unique) makes the host wait for every queued kernel. These checks catch
both on a CPU-only machine too: the engine and its tests name the device of every tensor they
construct, the engine gives the same results when the compute thread's default device is one it
must never use, and a training pass's own code calls no op that reads the device."""

from __future__ import annotations

import ast
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from tinker import types
from torch.utils._python_dispatch import TorchDispatchMode

from kitchen.adapters.local.train.forward import run_builtin_loss
from kitchen.adapters.local.train.pass_settings import PassSettings

from .conftest import TINY, take_grads
from .test_builtin_grads import rl_data
from .test_shared_prefix import SEVERAL, group_data

ROOT = Path(__file__).resolve().parents[2]
SCANNED = ("kitchen/adapters/local", "train_core", "tests/local_engine", "tests/export")
# torch functions that make a tensor (or generator) on the default device unless given `device=`
FACTORIES = frozenset(
    {"tensor", "as_tensor", "zeros", "ones", "empty", "full", "arange", "linspace", "rand"}
    | {"randn", "randint", "randperm", "eye", "Generator"}
)
# Tests of pure formulas on small host tensors; no engine tensor or model is involved.
HOST_FORMULA_TESTS = frozenset(
    {"test_losses.py", "test_optimizer.py", "test_stable_reinforce.py", "test_device.py"}
)


def unplaced_constructions(source: str) -> list[int]:
    """Lines where `torch.<factory>(...)` is called without a `device=` argument."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "torch"
            and node.func.attr in FACTORIES
            and not any(k.arg == "device" for k in node.keywords)
        ):
            lines.append(node.lineno)
    return sorted(lines)


def test_the_scan_finds_a_tensor_made_without_a_device() -> None:
    source = (
        "import torch\ng = torch.Generator().manual_seed(0)\nx = torch.zeros(3, device='cpu')\n"
    )
    assert unplaced_constructions(source) == [2]


def test_engine_and_engine_tests_name_the_device_of_every_tensor_they_make() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{line}"
        for folder in SCANNED
        for path in sorted((ROOT / folder).rglob("*.py"))
        if path.name not in HOST_FORMULA_TESTS
        for line in unplaced_constructions(path.read_text())
    ]
    assert not found, (
        "tensors made without naming their device (use device=engine_device() in tests, the "
        f"model's device in the engine, or device='cpu' where the host is meant): {found}"
    )


@contextmanager
def default_device_on_compute_thread(backend: Any, device: str) -> Iterator[None]:
    """torch's default device on the engine's compute thread (where every engine op runs)."""
    backend.compute.run(lambda: torch.set_default_device(device))
    try:
        yield
    finally:
        backend.compute.run(lambda: torch.set_default_device(None))


def engine_results(client: Any, sampler: Any) -> list[Any]:
    """What the engine computes on the paths that build tensors: training passes with and without
    shared prefixes (a built-in loss, a custom loss and its gradients), scoring, and sampling."""
    data = group_data("ppo")
    forward = client.forward(data, "ppo").result()

    def linear(_: list[types.Datum], lps: list[torch.Tensor]) -> tuple[Any, dict[str, float]]:
        return sum(lp.sum() for lp in lps), {}

    custom = client.forward_backward_custom(group_data("cross_entropy"), linear).result()
    grads = {k: v.cpu().numpy() for k, v in take_grads(client).items()}
    prompt = types.ModelInput.from_ints([5, 17, 42, 99, 7])
    scored = sampler.compute_logprobs(prompt).result()
    params = types.SamplingParams(max_tokens=6, seed=4, stop=[])
    sampled = sampler.sample(prompt, 3, params).result()
    return [
        forward.metrics,
        [o["logprobs"].to_numpy() for o in forward.loss_fn_outputs],
        custom.metrics,
        [o["logprobs"].to_numpy() for o in custom.loss_fn_outputs],
        grads,
        scored,
        [(s.tokens, s.logprobs) for s in sampled.sequences],
    ]


def test_the_engine_uses_no_default_device(backend: Any) -> None:
    """With the compute thread's default device set to "meta", a tensor the engine made without
    naming a device would hold no data: mixing it with the model's raises, and reading through it
    changes the results."""
    client = backend.create_lora_training_client(TINY, rank=4, seed=2)
    sampler = backend.create_sampling_client(base_model=TINY)
    want = engine_results(client, sampler)
    with default_device_on_compute_thread(backend, "meta"):
        got = engine_results(client, sampler)
    np.testing.assert_equal(got, want)


aten = torch.ops.aten
# Ops whose result the host must read before it can go on (on an accelerator: a device sync).
DEVICE_READS = frozenset(
    {aten._local_scalar_dense, aten.nonzero, aten._unique2, aten.unique_dim, aten.masked_select}
)
ENGINE = str(ROOT / "kitchen" / "adapters" / "local")


class EngineDeviceReads(TorchDispatchMode):
    """Records the engine-code lines that call an op reading the device (transformers' own, such
    as its mask checks, are not the engine's to remove)."""

    def __init__(self) -> None:
        super().__init__()
        self.sites: list[str] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if func.overloadpacket in DEVICE_READS:
            import traceback

            # The innermost caller outside torch itself (and this method) made the read.
            caller = [
                f
                for f in traceback.extract_stack()[:-1]
                if f"site-packages{os.sep}torch{os.sep}" not in f.filename
            ][-1]
            if caller.filename.startswith(ENGINE):
                self.sites.append(f"{Path(caller.filename).name}:{caller.lineno}")
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize(
    ("loss_fn", "data"),
    [
        ("ppo", rl_data("ppo")),  # per-token diagnostics too
        ("cross_entropy", group_data("cross_entropy", SEVERAL["padded"])),  # shared prefixes
        ("dro", group_data("dro")),
    ],
    ids=["ppo", "shared-prefixes", "dro"],
)
def test_a_training_pass_reads_nothing_back_from_the_device_until_it_is_done(
    backend: Any, loss_fn: str, data: list[types.Datum]
) -> None:
    client = backend.create_lora_training_client(TINY, rank=4, seed=1)
    reads = EngineDeviceReads()
    with client.host.use(client.adapter) as model, torch.enable_grad(), reads:
        run_builtin_loss(model, data, loss_fn, None, True, PassSettings(24))
    assert not reads.sites, f"engine code waiting on the device: {reads.sites}"


def test_the_device_read_check_sees_a_read() -> None:
    reads = EngineDeviceReads()
    with reads:
        exec(compile("float(torch.ones(2).sum())", f"{ENGINE}/probe.py", "exec"), {"torch": torch})
    assert reads.sites == ["probe.py:1"]


def test_a_decode_step_reads_the_device_once(backend: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Concurrent requests (three jobs, padded prompts) bring every chosen token and logprob of a
    forward pass to the host in one copy, and make no other read."""
    sampler = backend.create_sampling_client(base_model=TINY)
    copies: list[str] = []
    tolist = torch.Tensor.tolist

    def counted(tensor: torch.Tensor) -> Any:
        import traceback

        caller = traceback.extract_stack()[-2]
        if caller.filename.startswith(ENGINE):
            copies.append(f"{Path(caller.filename).name}:{caller.lineno}")
        return tolist(tensor)

    monkeypatch.setattr(torch.Tensor, "tolist", counted)
    reads = EngineDeviceReads()
    backend.compute.run(reads.__enter__)
    passes = backend.compute.batch.prefills + backend.compute.batch.steps
    try:
        params = types.SamplingParams(max_tokens=5, seed=1, stop=[])
        prompts = [[1, 2, 3], [4, 5, 6, 7, 8], [9]]
        futures = [sampler.sample(types.ModelInput.from_ints(p), 2, params) for p in prompts]
        assert all(len(s.tokens) == 5 for f in futures for s in f.result().sequences)
    finally:
        backend.compute.run(lambda: reads.__exit__(None, None, None))
    passes = backend.compute.batch.prefills + backend.compute.batch.steps - passes
    assert not reads.sites, f"engine code waiting on the device: {reads.sites}"
    assert len(copies) == passes, copies
