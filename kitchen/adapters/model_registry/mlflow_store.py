"""A ModelRegistry on an MLflow model registry, for teams that already run one (extra `mlflow`).

Each kitchen record is one MLflow model version of a registered model with the same name; MLflow
assigns the version. The record travels in the version's tags: readable `kitchen.*` tags for the
MLflow UI and search, and the whole record as JSON split over `kitchen.record.N` tags (MLflow 2
caps a tag value at 5000 characters). The version and its tags are created in one
`create_model_version` call, one transaction in MLflow's store, so a failure leaves no half record.
Versions of the same name created outside kitchen (no kitchen tags) are skipped.
"""

from __future__ import annotations

import builtins
import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from pydantic import ValidationError

from kitchen.adapters.model_registry.lineage import follow_lineage, missing_parent
from kitchen.adapters.model_registry.record import record_fields
from kitchen.engine.errors import ConfigError
from kitchen.ports.model_registry import (
    ModelDraft,
    ModelNotFoundError,
    RegisteredModel,
    RegistryError,
    check_model_name,
)

TAG = "kitchen."
CHUNKS_TAG = "kitchen.record.chunks"
CHUNK_CHARS = 5000
_NOT_FOUND = {"RESOURCE_DOES_NOT_EXIST", "NOT_FOUND"}
_EXISTS = {"RESOURCE_ALREADY_EXISTS", "ALREADY_EXISTS"}


def _chunks(text: str) -> list[str]:
    return [text[i : i + CHUNK_CHARS] for i in range(0, len(text), CHUNK_CHARS)] or [""]


class MLflowRegistry:
    """A ModelRegistry on the MLflow registry at `tracking_uri` (`sqlite:///mlflow.db`,
    `http://host:5000`, ...); `registry_uri` defaults to the tracking URI."""

    def __init__(self, tracking_uri: str, registry_uri: str | None = None) -> None:
        try:
            from mlflow import MlflowClient
            from mlflow.exceptions import MlflowException
        except ImportError as err:
            raise ConfigError(
                f"registry mlflow:{tracking_uri} needs the mlflow package; install it with "
                "pip install 'kitchen[mlflow]' (or use the default SQLite registry)"
            ) from err
        self.tracking_uri = tracking_uri
        self.location = f"mlflow:{tracking_uri}"
        self._exception_type: type[Exception] = MlflowException
        with self._errors("connecting"):
            self._client = MlflowClient(
                tracking_uri=tracking_uri, registry_uri=registry_uri or tracking_uri
            )

    def __repr__(self) -> str:
        return f"MLflowRegistry({self.tracking_uri!r})"

    @contextmanager
    def _errors(self, action: str) -> Iterator[None]:
        try:
            yield
        except self._exception_type as err:
            raise self._failed(err, action) from err

    def _failed(self, err: Exception, action: str) -> RegistryError:
        message = str(err).splitlines()[0] if str(err) else type(err).__name__
        return RegistryError(
            f"MLflow registry {self.tracking_uri} failed while {action}: {message}; check the "
            "tracking URI and that the server or database is reachable"
        )

    def _code(self, err: Exception) -> str:
        return str(getattr(err, "error_code", ""))

    # -- record <-> tags -----------------------------------------------------------------------

    def _tags(self, payload: dict[str, Any]) -> dict[str, str]:
        chunks = _chunks(json.dumps(payload, sort_keys=True, ensure_ascii=False))
        tags = {f"{TAG}record.{i}": chunk for i, chunk in enumerate(chunks)}
        tags[CHUNKS_TAG] = str(len(chunks))
        tags[f"{TAG}id"] = payload["id"]
        tags[f"{TAG}base_model"] = payload["base_model"]
        tags[f"{TAG}recipe"] = payload["recipe"]
        tags[f"{TAG}config_hash"] = payload["config_hash"]
        tags[f"{TAG}created_at"] = payload["created_at"]
        if payload["parent"]:
            tags[f"{TAG}parent"] = f"{payload['parent']['name']}:{payload['parent']['version']}"
        return tags

    def _record(self, model_version: Any) -> RegisteredModel | None:
        """The kitchen record in a model version's tags; None for versions kitchen did not write."""
        tags: dict[str, str] = dict(model_version.tags or {})
        if CHUNKS_TAG not in tags:
            return None
        where = f"{model_version.name}:{model_version.version}"
        try:
            text = "".join(tags[f"{TAG}record.{i}"] for i in range(int(tags[CHUNKS_TAG])))
            payload = json.loads(text)
            return RegisteredModel.model_validate(
                {**payload, "version": int(model_version.version)}
            )
        except (KeyError, ValueError, ValidationError) as err:
            raise RegistryError(
                f"MLflow registry {self.tracking_uri}: the kitchen tags of model version {where} "
                f"are damaged ({type(err).__name__}: {str(err).splitlines()[0]}); register the "
                "model again"
            ) from err

    # -- ModelRegistry -------------------------------------------------------------------------

    def register(self, draft: ModelDraft) -> RegisteredModel:
        if draft.parent is not None:
            try:
                self.get(draft.parent.name, draft.parent.version)
            except ModelNotFoundError as err:
                raise missing_parent(draft, self.location) from err
        payload = record_fields(draft)
        action = f"registering {draft.name}"
        self._ensure_registered_model(draft.name, action)
        # MLflow needs a source URI; the checkpoint paths themselves are in the record.
        source = draft.state_path or draft.sampler_path or f"kitchen:{draft.name}"
        with self._errors(action):
            model_version = self._client.create_model_version(
                name=draft.name,
                source=source,
                tags=self._tags(payload),
                description=f"kitchen {draft.recipe} on {draft.base_model}",
            )
        return RegisteredModel.model_validate({**payload, "version": int(model_version.version)})

    def _ensure_registered_model(self, name: str, action: str) -> None:
        try:
            self._client.get_registered_model(name)
            return
        except self._exception_type as err:
            if self._code(err) not in _NOT_FOUND:
                raise self._failed(err, action) from err
        try:
            self._client.create_registered_model(name, tags={f"{TAG}managed": "true"})
        except self._exception_type as err:
            # Another process created it between our get and create: that is fine.
            if self._code(err) not in _EXISTS:
                raise self._failed(err, action) from err

    def get(self, name: str, version: int | None = None) -> RegisteredModel:
        check_model_name(name)
        if version is None:
            records = self.list(name)
            if not records:
                raise ModelNotFoundError(
                    f"no model named {name!r} registered by kitchen in {self.location}; "
                    "`kitchen models list` shows what is registered"
                )
            return records[-1]
        try:
            model_version = self._client.get_model_version(name, str(version))
        except self._exception_type as err:
            if self._code(err) in _NOT_FOUND:
                raise ModelNotFoundError(
                    f"model {name}:{version} is not in {self.location}; `kitchen models list` "
                    "shows what is registered"
                ) from err
            raise self._failed(err, f"reading {name}:{version}") from err
        record = self._record(model_version)
        if record is None:
            raise ModelNotFoundError(
                f"model version {name}:{version} in {self.location} was not registered by kitchen "
                "(it has no kitchen.record tags)"
            )
        return record

    def list(self, name: str | None = None) -> builtins.list[RegisteredModel]:
        filter_string = f"name='{check_model_name(name)}'" if name is not None else None
        records: builtins.list[RegisteredModel] = []
        page_token = None
        with self._errors("listing models"):
            while True:
                page = self._client.search_model_versions(
                    filter_string=filter_string, page_token=page_token
                )
                records.extend(r for mv in page if (r := self._record(mv)) is not None)
                page_token = page.token
                if not page_token:
                    break
        return sorted(records, key=lambda r: (r.name, r.version))

    def lineage(self, name: str, version: int | None = None) -> builtins.list[RegisteredModel]:
        return follow_lineage(self.get, name, version)
