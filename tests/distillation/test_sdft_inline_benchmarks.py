"""sdft's inline benchmarks: gsm8k and math500 (the bundled slices `kitchen eval --harness
benchmark` reads) scored during training every infrequent_eval_every steps and at the end, on the
weights each step starts from, with the same pass@k as the benchmark runner's evaluator on the
same client."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from cookbook.evals.inline_benchmarks import InlineBenchmark, LoadBenchmarks
from kitchen.adapters.datasets import HFDatasetStore
from kitchen.adapters.fake import FakeBackend
from kitchen.app.eval_runner import BenchmarkSettings, benchmark_evaluators
from kitchen.app.launch import run
from kitchen.engine.errors import ConfigError
from train_core.renderers import get_renderer

COMMON = {"save_every": 0, "no_register": True, "groups_per_batch": 2, "max_tokens": 64,
          "eval_every": 0, "num_test_demos": 0}  # fmt: skip


def test_benchmarks_run_at_their_cadence_and_at_the_end() -> None:
    fake = FakeBackend()
    overrides = {**COMMON, "num_batches": 3, "inline_benchmarks": "gsm8k,math500",
                 "infrequent_eval_every": 2, "benchmark_limit": 3}  # fmt: skip
    result = run("sdft", overrides, backend=fake)
    assert result.steps == 3
    for name in ("gsm8k", "math500"):
        scored = [m for m in result.metrics if f"test/{name}/pass@1" in m]
        # before steps 0 and 2, then after the last step (the final report)
        assert len(scored) == 3
        assert all(m[f"test/{name}/num_problems"] == 3 for m in scored)
        assert all(0.0 <= m[f"test/{name}/pass@1"] <= 1.0 for m in scored)
    in_loop = [m for m in result.metrics if "test/gsm8k/pass@1" in m and "optim/lr" in m]
    assert len(in_loop) == 2  # in the records of steps 0 and 2


def test_inline_pass_at_k_equals_the_benchmark_runners() -> None:
    fake = FakeBackend()
    fake.responder = lambda tokens: "The answer is \\boxed{36}."  # right on problem 2 of 8
    client = fake.create_sampling_client(base_model="fake")
    renderer = get_renderer("role_colon", fake.tokenizer)
    store = HFDatasetStore()
    settings = BenchmarkSettings(num_samples=2, ks=(1, 2), max_tokens=32, limit=8)
    theirs = asyncio.run(
        benchmark_evaluators(["gsm8k"], store, settings)["gsm8k"](client, renderer=renderer)
    )

    class Ctx:
        state = SimpleNamespace(benchmarks=None)

        def port(self, name: str) -> HFDatasetStore:
            assert name == "datasets"
            return store

    ctx = Ctx()
    LoadBenchmarks(names=("gsm8k",), limit=8)(ctx)  # type: ignore[arg-type]
    ours = asyncio.run(
        InlineBenchmark(benchmark="gsm8k", num_samples=2, ks=(1, 2), max_tokens=32)(
            client, renderer=renderer, benchmarks=ctx.state.benchmarks
        )
    )
    assert ours == {f"test/{k}": v for k, v in theirs.items()}
    assert ours["test/gsm8k/num_problems"] == 8 and ours["test/gsm8k/pass@1"] == 1 / 8


def test_an_unknown_benchmark_is_refused_before_the_run() -> None:
    with pytest.raises(ConfigError, match="unknown benchmark 'gsm9k'"):
        LoadBenchmarks(names=("gsm9k",))


def test_a_k_above_the_sample_count_is_refused_when_the_evaluator_is_built() -> None:
    with pytest.raises(ValueError, match="benchmark gsm8k: pass@2 needs"):
        InlineBenchmark(benchmark="gsm8k", num_samples=1, ks=(1, 2))
