"""TinkerBackend: kitchen's TrainingBackend port over the official SDK's ServiceClient.

    TINKER_API_KEY=tml-... kitchen run sl_basic --backend tinker [--base-url URL]

One ServiceClient (one session) per backend; `close()` finishes the session. Checkpoint paths are
the service's `tinker://...` paths, recorded as returned and resumed from as given.
"""

from __future__ import annotations

import logging
import sys
from dataclasses import asdict
from typing import Any, Literal

from kitchen.adapters.tinker.clients import TinkerSamplingClient, TinkerTrainingClient
from kitchen.adapters.tinker.credentials import api_key_from_env, base_url
from kitchen.adapters.tinker.futures import backend_error, quiet_request_failures, wait, wrap
from kitchen.engine.errors import BackendError
from kitchen.engine.futures import APIFuture
from kitchen.ports import BackendSettings, LoraRequest, TrainingBackend

log = logging.getLogger("kitchen.tinker")
PREFLIGHT_TIMEOUT_S = 10.0


class TinkerBackend(TrainingBackend):
    """A ServiceClient-shaped factory of SDK-backed training and sampling clients."""

    name = "tinker"

    def __init__(self, settings: BackendSettings | None = None, service_client: Any = None) -> None:
        import tinker

        self.settings = settings or BackendSettings()
        quiet_request_failures()
        self.api_key = api_key_from_env()
        self.base_url = base_url(self.settings.base_url)
        if service_client is None:
            if self.settings.extra.get("preflight", True):
                preflight(self.base_url or _sdk_default_url(), self.api_key)
            service_client = tinker.ServiceClient(base_url=self.base_url, api_key=self.api_key)
        self.sdk = service_client
        self._rest: Any = None  # the SDK's RestClient, made at the first delete
        self._closed = False

    def lora_training_client(self, request: LoraRequest) -> TinkerTrainingClient:
        if request.rank <= 0:
            raise BackendError(
                f"tinker: LoRA rank is {request.rank}; the service trains LoRA only (rank >= 1)"
            )
        if request.train_vision:
            raise BackendError(
                "tinker: the service adapts the language model only; train_vision is a "
                "local-engine option"
            )
        # The request's other fields are the SDK's own arguments, by the SDK's names.
        sdk_args = {k: v for k, v in asdict(request).items() if k != "train_vision"}
        client = wait(
            lambda: self.sdk.create_lora_training_client(**sdk_args),
            f"create_lora_training_client({request.base_model})",
            self.api_key,
        )
        log.info("tinker: training client %s on %s", client.model_id, request.base_model)
        return TinkerTrainingClient(client, self)

    def create_training_client_from_state(self, path: str) -> TinkerTrainingClient:
        """Weights from a `save_state` path; the optimizer starts fresh."""
        what = f"create_training_client_from_state({path})"
        client = wait(lambda: self.sdk.create_training_client_from_state(path), what, self.api_key)
        return TinkerTrainingClient(client, self)

    def create_training_client_from_state_with_optimizer(self, path: str) -> TinkerTrainingClient:
        """Weights and optimizer state: resuming equals never having stopped."""
        what = f"create_training_client_from_state_with_optimizer({path})"
        make = self.sdk.create_training_client_from_state_with_optimizer
        return TinkerTrainingClient(wait(lambda: make(path), what, self.api_key), self)

    def create_sampling_client(
        self, model_path: str | None = None, base_model: str | None = None
    ) -> TinkerSamplingClient:
        if model_path is None and base_model is None:
            raise BackendError("tinker: create_sampling_client needs model_path or base_model")
        what = f"create_sampling_client({model_path or base_model})"
        make = self.sdk.create_sampling_client
        sdk = wait(lambda: make(model_path=model_path, base_model=base_model), what, self.api_key)
        return TinkerSamplingClient(sdk, self)

    def delete_checkpoint(self, path: str) -> APIFuture[None]:
        """Delete a `tinker://` checkpoint on the service (kitchen.ports.CheckpointDeleter), with
        the SDK's RestClient on this backend's service and key."""
        if self._rest is None:
            import tinker

            self._rest = tinker.RestClient(base_url=self.base_url, api_key=self.api_key)
        rest = self._rest
        return wrap(
            lambda: rest.delete_checkpoint_from_tinker_path(path),
            f"delete_checkpoint({path})",
            self.api_key,
        )

    def close(self) -> None:
        """Finish the session (the service frees its models) and release the SDK's connections."""
        if self._closed:
            return
        self._closed = True
        try:
            self.sdk.close(_finish_status()).future().result(timeout=30)
        except Exception as e:
            log.warning("%s", backend_error("close", e, self.api_key))


def preflight(url: str, api_key: str) -> None:
    """Fail in seconds, with a clear line, when the service is unreachable or refuses the key;
    the SDK itself would retry a refused connection for five minutes."""
    import httpx

    try:
        response = httpx.get(
            f"{url}/api/v1/healthz", headers={"X-API-Key": api_key}, timeout=PREFLIGHT_TIMEOUT_S
        )
    except httpx.HTTPError as e:
        raise BackendError(
            f"tinker: cannot reach the service at {url}: {type(e).__name__}: {e}"
        ) from None
    if response.status_code in (401, 403):
        raise BackendError(
            f"tinker: the service at {url} refused the API key (HTTP {response.status_code}); check TINKER_API_KEY"
        )


def _finish_status() -> Literal["success", "errored", "interrupted"]:
    # Called from the runner's `finally`: an exception in flight there is how the run ended.
    error = sys.exc_info()[1]
    if error is None:
        return "success"
    return "errored" if isinstance(error, Exception) else "interrupted"


def _sdk_default_url() -> str:
    from tinker.lib.base_url import resolve_base_url

    return resolve_base_url(None)
