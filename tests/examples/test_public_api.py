"""The public API: what `kitchen` and `train_core` re-export, that importing them stays cheap, and
that `kitchen.run_workflow` runs a Workflow object you built."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from pydantic import Field

import kitchen
import train_core
from kitchen.adapters.fake import FakeBackend
from tests.helpers import modules_loaded_by


def _loaded_after(code: str) -> list[str]:
    return modules_loaded_by(code, ("torch", "tinker", "transformers"))


def test_import_kitchen_loads_neither_torch_nor_tinker():
    assert _loaded_after("import kitchen; kitchen.Workflow, kitchen.stage, kitchen.RECIPES") == []


def test_import_train_core_loads_no_subpackage_until_a_name_is_used():
    assert _loaded_after("import train_core") == []


def test_every_public_name_resolves():
    for name in kitchen.__all__:
        assert getattr(kitchen, name) is not None, name
    for name in train_core.__all__:
        assert getattr(train_core, name) is not None, name
    assert set(kitchen.__all__) <= set(dir(kitchen))


def test_the_names_the_docs_promise_are_exported():
    promised = {
        "Workflow", "Loop", "When", "Await", "Every", "stage", "Stage", "Context",
        "BaseState", "TrainState", "PendingQueue", "Handle", "run", "run_workflow",
        "Recipe", "TrainConfig", "RECIPES", "BACKENDS", "DATASET_STORES", "ENVS", "validate",
        "KitchenError", "ConfigError", "DataError", "BackendError", "StageError", "GraphError",
    }  # fmt: skip
    assert promised <= set(kitchen.__all__)
    assert {"get_renderer", "Message", "TrainOnWhat", "Env", "EnvGroupBuilder", "RLDataset",
            "StepResult", "conversation_to_datum"} <= set(train_core.__all__)  # fmt: skip


def test_stage_and_validate_stay_the_function_after_their_modules_are_imported():
    import kitchen.engine.stage
    import kitchen.engine.validate

    assert callable(kitchen.stage) and kitchen.stage.__module__ == "kitchen.engine.stage"
    assert kitchen.validate.__name__ == "validate"


def test_unknown_names_raise_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'Wrokflow'"):
        _ = kitchen.Wrokflow  # type: ignore[attr-defined]
    with pytest.raises(AttributeError):
        _ = train_core.not_a_name  # type: ignore[attr-defined]


def test_registries_list_the_built_in_adapters():
    assert {"fake", "local", "tinker"} <= set(kitchen.BACKENDS.names())
    assert "hf" in kitchen.DATASET_STORES.names()
    assert "sl_basic" in kitchen.RECIPES


class Counter(kitchen.BaseState):
    total: int = Field(0, description="Sum so far")
    n_items: int | None = None
    item_idx: int = 0


@dataclass(frozen=True)
class Load:
    n: int
    name: str = "load"
    reads: frozenset[str] = frozenset()
    writes: frozenset[str] = frozenset({"n_items"})

    def __call__(self, ctx: kitchen.Context[Counter]) -> None:
        ctx.state.n_items = self.n


@kitchen.stage(reads={"item_idx", "total"}, writes={"total"})
def add(ctx: kitchen.Context[Counter]) -> kitchen.Metrics:
    ctx.state.total += ctx.state.item_idx
    return {"total": ctx.state.total}


def test_run_workflow_runs_a_workflow_object_and_writes_the_run_directory(tmp_path):
    wf = kitchen.Workflow(
        "count", Counter, [Load(4), kitchen.Loop("item", "n_items", "item_idx", [add], steps=True)]
    )
    fake = FakeBackend()
    result = kitchen.run_workflow(wf, backend=fake, log_dir=tmp_path / "run")
    assert isinstance(result.state, Counter) and result.state.total == 0 + 1 + 2 + 3
    assert result.steps == 4
    assert [m["total"] for m in result.metrics] == [0, 1, 3, 6]
    assert (tmp_path / "run" / "plan.txt").read_text().startswith("workflow count")
    assert fake.closed


def test_run_workflow_validates_before_creating_the_backend():
    wf = kitchen.Workflow("bad", Counter, [kitchen.Loop("item", "n_items", "item_idx", [add])])
    with pytest.raises(kitchen.GraphError, match="reads 'n_items'"):
        kitchen.run_workflow(wf, backend="no-such-backend")
