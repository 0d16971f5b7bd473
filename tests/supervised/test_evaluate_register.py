"""Runs end with evaluate -> register; a run can start from a registered model (lineage)."""

from kitchen.adapters.fake import FakeBackend
from kitchen.adapters.model_registry import open_registry
from kitchen.app.launch import run
from tests.helpers import tiny_sft_config


def test_result_state_has_eval_results_and_registered_model_and_lineage(tmp_path):
    registry = tmp_path / "models.db"
    base = tiny_sft_config(
        tmp_path,
        held_out=True,
        batch_size=8,
        num_samples_to_show=0,
        registry=str(registry),
        eval_labels=True,
    )
    fake = FakeBackend()
    first = run(
        "sl_basic", {**base, "registry_name": "arith"}, backend=fake, log_dir=tmp_path / "a"
    )
    assert (
        first.state.registered_model["name"] == "arith"
        and first.state.registered_model["version"] == 1
    )
    assert {"test/nll", "test/accuracy", "test/f1", "test/precision", "test/recall"} <= set(
        first.state.eval_results
    )

    second = run(
        "sl_basic",
        {**base, "registry_name": "arith", "base_model": "registry:arith:1"},
        backend=fake,
        log_dir=tmp_path / "b",
    )
    assert second.state.registered_model["version"] == 2
    # the second run loaded the first run's final weights before training
    assert "load_state" in fake.calls

    store = open_registry(str(registry))
    chain = store.lineage("arith", 2)
    assert [str(m.ref) for m in chain] == ["arith:2", "arith:1"]
    record = store.get("arith", 2)
    assert record.base_model == "kitchen/tiny-llama"
    assert record.state_path and record.sampler_path
    assert record.eval_metrics["test/nll"] == second.state.eval_results["test/nll"]
    assert {(d.name, d.split) for d in record.datasets} == {(base["dataset"], "train")}


def test_no_register_skips_the_registry(tmp_path):
    registry = tmp_path / "models.db"
    cfg = tiny_sft_config(tmp_path, batch_size=8, no_register=True, registry=str(registry))
    result = run("sl_loop", cfg, backend=FakeBackend())
    assert result.state.registered_model is None
    assert not registry.exists()
