"""tinker-cookbook's `weights.download`, unmodified, against `kitchen serve`: an external weights
export comes down as it was saved, and a training checkpoint comes down through the temporary
age-encrypted export the cookbook asks for (and deletes afterwards)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
import tinker
from safetensors.torch import load_file

from kitchen.serve.external_weights import DOWNLOAD_PREFIX
from tests.tinker_backend.conftest import TEST_KEY, sft_datum

from .hf_cache import LLAMA

# tinker-cookbook's code against a `kitchen serve` process (its scripts in processes of their own).
# one pytest-xdist worker for the package: cookbook_env starts a `kitchen serve` per worker it runs on
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("cookbook_compat")]

pytest.importorskip("pyrage", reason="tinker_cookbook.weights needs pyrage (make install)")
ADAPTER = "adapter_model.safetensors"


def _assert_same_tensors(downloaded: Path, served: Path) -> None:
    from tinker_cookbook.weights._artifacts import load_adapter_weights

    got, config = load_adapter_weights(downloaded)  # the cookbook's own loader accepts it
    want = load_file(str(served / ADAPTER))
    assert config["r"] == 4 and got.keys() == want.keys()
    assert any(".lora_B." in k and bool(t.abs().sum() > 0) for k, t in got.items())
    for key, tensor in want.items():
        assert bool((got[key].cpu() == tensor).all()), key


def test_cookbook_downloads_external_and_training_weights(
    cookbook_env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tinker_cookbook import weights

    monkeypatch.setenv("TINKER_API_KEY", TEST_KEY)
    # base_url passed, never read from the environment: the SDK caches REST connections per
    # (base_url argument, key) for the whole process, and later tests talk to other servers.
    url = cookbook_env["TINKER_BASE_URL"]
    client = tinker.ServiceClient(base_url=url)
    training = client.create_lora_training_client(base_model=LLAMA, rank=4).result()
    training.forward_backward([sft_datum(list(range(5, 25)))], "cross_entropy").result()
    training.optim_step(tinker.AdamParams(learning_rate=1e-2)).result()  # LoRA B moves off 0
    state_path = training.save_state("dl-state").result().path
    external_path = training.save_weights_external("dl-external").result().path
    assert external_path.endswith("/external_weights/dl-external")

    root = Path(cookbook_env["KITCHEN_TEST_ROOT"]) / "checkpoints"
    [served_export] = root.rglob("external_weights/*--dl-external")
    [served_state] = root.rglob("weights/*--dl-state")

    out = weights.download(
        tinker_path=external_path, output_dir=str(tmp_path / "external"), base_url=url
    )
    _assert_same_tensors(Path(out), served_export)
    # the download route needs no key, so a URL the server did not sign is refused, never a 500
    file_url = f"{url}{DOWNLOAD_PREFIX}{served_export.name}/{ADAPTER}"
    for query in ("", "?expires=9999999999&signature=00", "?expires=soon&signature=00"):
        response = httpx.get(file_url + query)
        assert response.status_code == 403, (query, response.text)
        assert response.json()["detail"] == "download URL invalid or expired"

    out = weights.download(tinker_path=state_path, output_dir=str(tmp_path / "state"), base_url=url)
    _assert_same_tensors(Path(out), served_state)
    assert not list(Path(out).glob("*.age"))  # decrypted on the client
    assert not list(root.rglob("external_weights/*--download"))  # its temporary export is gone

    listed = tinker.RestClient(base_url=url).list_checkpoints(training.model_id).result()
    assert {c.checkpoint_type for c in listed.checkpoints} == {"training", "external"}
    client.close("success").result()
