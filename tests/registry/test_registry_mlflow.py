"""The MLflow adapter against a real local MLflow tracking store on SQLite."""

from __future__ import annotations

import pytest

from tests.registry.drafts import make_draft

pytest.importorskip("mlflow")
pytest.importorskip("sqlalchemy")  # the SQL tracking store; mlflow-skinny does not pull it in

from kitchen.adapters.model_registry import open_registry
from kitchen.adapters.model_registry.mlflow_store import MLflowRegistry
from kitchen.ports.model_registry import ModelNotFoundError, ModelRef


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> MLflowRegistry:
    # Creating the MLflow schema (alembic migrations) takes seconds: one store per module.
    db = tmp_path_factory.mktemp("mlflow") / "mlflow.db"
    store = open_registry(f"mlflow:sqlite:///{db}")
    assert isinstance(store, MLflowRegistry)
    return store


def test_record_round_trips_through_mlflow(registry: MLflowRegistry) -> None:
    # A config larger than one MLflow tag value (5000 chars) exercises the chunked record.
    big = {f"option_{i}": "x" * 40 for i in range(300)}
    draft = make_draft("rt-model", config={**big, "api_key": "sk-SECRET"})
    record = registry.register(draft)
    assert record.version == 1
    assert record.config["api_key"] == "<redacted>"
    fetched = registry.get("rt-model", 1)
    assert fetched == record
    assert registry.get("rt-model") == record
    assert fetched.datasets == draft.datasets and fetched.eval_metrics == draft.eval_metrics
    tags = registry._client.get_model_version("rt-model", "1").tags
    assert tags["kitchen.base_model"] == "kitchen/tiny-llama"
    assert "sk-SECRET" not in "".join(tags.values())


def test_versions_and_two_step_lineage_in_mlflow(registry: MLflowRegistry) -> None:
    first = registry.register(make_draft("ml-base"))
    again = registry.register(make_draft("ml-base"))
    child = registry.register(make_draft("ml-child", parent=again.ref, recipe="dpo"))
    assert (first.version, again.version, child.version) == (1, 2, 1)
    assert [str(r.ref) for r in registry.lineage("ml-child", 1)] == ["ml-child:1", "ml-base:2"]
    assert [str(r.ref) for r in registry.list("ml-base")] == ["ml-base:1", "ml-base:2"]
    assert {"ml-base:1", "ml-base:2", "ml-child:1"} <= {str(r.ref) for r in registry.list()}


def test_unknown_and_foreign_versions_are_not_found(registry: MLflowRegistry) -> None:
    with pytest.raises(ModelNotFoundError):
        registry.get("never-registered")
    with pytest.raises(ModelNotFoundError):
        registry.get("never-registered", 3)
    registry._client.create_registered_model("team-model")
    registry._client.create_model_version("team-model", source="s3://bucket/model")
    with pytest.raises(ModelNotFoundError, match="not registered by kitchen"):
        registry.get("team-model", 1)
    assert registry.list("team-model") == []
    with pytest.raises(ModelNotFoundError, match="parent model team-model:1"):
        registry.register(make_draft("x", parent=ModelRef(name="team-model", version=1)))
