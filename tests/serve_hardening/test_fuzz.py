"""Hostile input to `kitchen serve`: every malformed request gets a 4xx with a one-line reason at
once, the server keeps serving, and a session training beside it is not disturbed (its loss and
its seeded samples are what they were)."""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
import pytest
from tinker import types

from kitchen.adapters.local.model.tiny import MAX_CONTEXT
from tests.serve_hardening.conftest import KEY, MAX_BODY, TINY, Server
from tests.tinker_backend.conftest import sft_datum as datum

pytestmark = pytest.mark.slow
API = "/api/v1"
PROTO = {"Content-Type": "application/x-protobuf"}
PROMPT = {"chunks": [{"type": "encoded_text", "tokens": [1, 2, 3]}]}
ADAM = {"type": "adam", "learning_rate": 1e-3}


def _cases(victim_model: str) -> list[tuple[str, str, Any, dict[str, str]]]:
    """(what, path, body (dict = JSON, bytes = raw), extra headers)."""
    json_routes = [
        "create_session", "session_heartbeat", "create_model", "get_info", "save_weights",
        "save_weights_for_sampler", "load_weights", "weights_info", "create_sampling_session",
        "optim_step", "asample", "retrieve_future", "cancel_future",
    ]  # fmt: skip
    cases: list[tuple[str, str, Any, dict[str, str]]] = []
    for route in json_routes:
        cases.append((f"{route}: invalid JSON", f"{API}/{route}", b'{"session_id": ', {}))
        cases.append((f"{route}: a JSON list", f"{API}/{route}", b"[1, 2]", {}))
        cases.append((f"{route}: empty body", f"{API}/{route}", b"", {}))
    too_big = b'{"tags": ["' + b"x" * (MAX_BODY + 10) + b'"]}'
    cases += [
        ("body over the limit", f"{API}/create_session", too_big, {}),
        ("protobuf over the limit", f"{API}/forward_backward", b"\x0a" * (MAX_BODY + 1), PROTO),
        ("forward_backward: not protobuf", f"{API}/forward_backward", b"\xff\xfe garbage", PROTO),
        ("forward_backward: JSON body", f"{API}/forward_backward", {"model_id": victim_model}, {}),
        # wrong types
        ("session_heartbeat: int id", f"{API}/session_heartbeat", {"session_id": 5}, {}),
        ("get_info: list id", f"{API}/get_info", {"model_id": [1]}, {}),
        ("create_model: rank 'x'", f"{API}/create_model",
         {"session_id": "s", "model_seq_id": 0, "base_model": TINY, "lora_config": {"rank": "x"}}, {}),
        ("optim_step: lr 'fast'", f"{API}/optim_step",
         {"model_id": victim_model, "optim_params": {"type": "adam", "learning_rate": "fast"}}, {}),
        ("asample: num_samples 'many'", f"{API}/asample",
         {"num_samples": "many", "prompt": PROMPT, "sampling_params": {}, "base_model": TINY}, {}),
        ("asample: prompt a string", f"{API}/asample",
         {"num_samples": 1, "prompt": "hello", "sampling_params": {}, "base_model": TINY}, {}),
        ("retrieve_future: int id", f"{API}/retrieve_future", {"request_id": 1}, {}),
        ("weights_info: path 3", f"{API}/weights_info", {"tinker_path": 3}, {}),
        # unknown models, sessions, samplers, requests
        ("heartbeat: unknown session", f"{API}/session_heartbeat", {"session_id": "nope"}, {}),
        ("create_model: unknown session", f"{API}/create_model",
         {"session_id": "nope", "model_seq_id": 0, "base_model": TINY}, {}),
        ("get_info: unknown model", f"{API}/get_info", {"model_id": "nope"}, {}),
        ("optim_step: unknown model", f"{API}/optim_step",
         {"model_id": "nope", "optim_params": ADAM}, {}),
        ("save_weights: unknown model", f"{API}/save_weights", {"model_id": "nope", "path": "x"}, {}),
        ("asample: unknown sampler", f"{API}/asample",
         {"num_samples": 1, "prompt": PROMPT, "sampling_params": {}, "sampling_session_id": "nope"}, {}),
        ("retrieve_future: unknown request", f"{API}/retrieve_future", {"request_id": "nope"}, {}),
        ("create_sampling_session: unknown session", f"{API}/create_sampling_session",
         {"session_id": "nope", "sampling_session_seq_id": 0, "base_model": TINY}, {}),
        ("create_model: unknown base model", f"{API}/create_model",
         {"session_id": "{session}", "model_seq_id": 99, "base_model": "no/such-model"}, {}),
        ("save_weights: name with a slash", f"{API}/save_weights",
         {"model_id": victim_model, "path": "../../escape"}, {}),
    ]  # fmt: skip
    bad_paths = [
        "tinker://", "tinker://run", "tinker://run/weights", "tinker://run/weights/",
        "tinker://run/other/x", "tinker://../weights/x", "tinker://run/weights/../../etc",
        "tinker://run/weights/a/b", "tinker://run/weights/missing", "file:///etc/passwd",
        "http://example.com/ckpt", "/etc", "/", "relative/folder", "local:///etc",
        "~/somewhere", "/tmp/../etc",
    ]  # fmt: skip
    for path in bad_paths:
        cases.append((f"load_weights {path!r}", f"{API}/load_weights",
                      {"session_id": "{session}", "model_seq_id": 50, "path": path}, {}))  # fmt: skip
        cases.append((f"weights_info {path!r}", f"{API}/weights_info", {"tinker_path": path}, {}))
        cases.append((f"sampler on {path!r}", f"{API}/create_sampling_session",
                      {"session_id": "{session}", "sampling_session_seq_id": 50, "model_path": path}, {}))  # fmt: skip
    return cases


def _send(
    server: Server, path: str, body: Any, headers: dict[str, str], session: str
) -> httpx.Response:
    if isinstance(body, dict):
        body = json.dumps(body).replace("{session}", session).encode()
        headers = {"Content-Type": "application/json", **headers}
    return httpx.post(
        server.url + path, content=body, headers={**server.headers, **headers}, timeout=30
    )


def _victim(sdk: Any) -> tuple[Any, Any, list[types.Datum]]:
    client = sdk.create_lora_training_client(TINY, rank=4, seed=7).result()
    tokenizer = client.get_tokenizer()
    batch = [datum(tokenizer.encode("the victim trains on this line", add_special_tokens=False))]
    for _ in range(2):
        client.forward_backward(batch, "cross_entropy")
        client.optim_step(types.AdamParams(learning_rate=1e-2)).result()
    sampler = client.save_weights_and_get_sampling_client().result()
    return client, sampler, batch


def _observe(client: Any, sampler: Any, batch: list[types.Datum]) -> tuple[float, list[int]]:
    loss = float(client.forward(batch, "cross_entropy").result().metrics["loss:sum"])
    params = types.SamplingParams(max_tokens=6, temperature=1.0, seed=11)
    tokens = sampler.sample(batch[0].model_input, 1, params).result().sequences[0].tokens
    return loss, list(tokens)


def test_malformed_requests_get_one_line_4xx_and_disturb_no_session(
    server: Server, sdk: Any
) -> None:
    client, sampler, batch = _victim(sdk)
    before = _observe(client, sampler, batch)
    session = client.model_id.split(":")[0]
    cases = _cases(client.model_id)
    wrong = []
    for what, path, body, headers in cases:
        response = _send(server, path, body, headers, session)
        detail = response.json().get("detail", "") if response.content else ""
        if not (400 <= response.status_code < 500 and detail and "\n" not in str(detail)):
            wrong.append(f"{what}: {response.status_code} {response.text[:200]}")
    assert not wrong, "\n".join(wrong)
    assert httpx.get(f"{server.url}/api/v1/healthz", headers=server.headers).status_code == 200
    assert _observe(client, sampler, batch) == before  # the victim's weights and sampler as before
    print(f"\nfuzz: {len(cases)} malformed requests, {len(cases)} 4xx, sessions disturbed: 0")


def test_every_route_needs_the_key(server: Server) -> None:
    paths = ["/api/v1/healthz", "/api/v1/get_server_capabilities", "/v1/models",
             "/v1/chat/completions", "/no/such/route", "/kitchen/v1/lanes/x"]  # fmt: skip
    for path in paths:
        for headers in ({}, {"X-API-Key": "tml-wrong"}, {"Authorization": "Bearer tml-wrong"}):
            assert httpx.get(server.url + path, headers=headers).status_code == 401, (path, headers)
            assert httpx.post(server.url + path, headers=headers).status_code == 401, (
                path,
                headers,
            )
    ok = httpx.get(f"{server.url}/api/v1/healthz", headers={"Authorization": f"Bearer {KEY}"})
    assert ok.status_code == 200


def test_checkpoints_load_only_from_the_root_and_the_allow_list(server: Server, sdk: Any) -> None:
    import shutil

    client = sdk.create_lora_training_client(TINY, rank=4, seed=3).result()
    saved = client.save_state("confined").result().path
    folder = next((server.checkpoint_dir / "checkpoints" / "weights").glob("*--confined"))
    allowed = server.allowed / "copied"
    outside = server.allowed.parent / "outside"
    shutil.copytree(folder, allowed)
    shutil.copytree(folder, outside)
    sdk.create_training_client_from_state(saved).result()  # its own tinker:// path
    sdk.create_training_client_from_state(str(folder)).result()  # a folder under the root
    sdk.create_training_client_from_state(str(allowed)).result()  # an allow-listed folder
    import tinker

    for refused in (str(outside), f"{server.allowed}/../outside", str(server.allowed) + "-x"):
        with pytest.raises(tinker.BadRequestError, match="outside this server's checkpoint"):
            sdk.create_training_client_from_state(refused).result()
    (server.allowed / "link").symlink_to(outside)
    with pytest.raises(tinker.BadRequestError, match="outside"):
        sdk.create_training_client_from_state(str(server.allowed / "link")).result()


@pytest.mark.parametrize(
    ("what", "change"),
    [
        pytest.param("token id past the vocab", {"prompt": {"chunks": [{"type": "encoded_text", "tokens": [10**9]}]}}),
        pytest.param("negative token id", {"prompt": {"chunks": [{"type": "encoded_text", "tokens": [-5]}]}}),
        pytest.param("max_tokens -1", {"sampling_params": {"max_tokens": -1}}),
        pytest.param("prompt past the context", {"prompt": {"chunks": [{"type": "encoded_text", "tokens": [1] * (MAX_CONTEXT + 8)}]}}),
        pytest.param("top_p 7", {"sampling_params": {"max_tokens": 2, "top_p": 7}}),
    ],
)  # fmt: skip
def test_engine_side_bad_sampling_input_gets_4xx(
    server: Server, what: str, change: dict[str, Any]
) -> None:
    body = {
        "num_samples": 1,
        "prompt": PROMPT,
        "sampling_params": {"max_tokens": 2},
        "base_model": TINY,
    }
    response = _send(server, f"{API}/asample", {**body, **change}, {}, "")
    if response.status_code == 200:
        # Refused when its work is checked: the future fails as the SDK's protocol has it (a
        # user-category error, which the SDK raises without retrying), with a one-line reason.
        request_id = response.json()["request_id"]
        result = _send(server, f"{API}/retrieve_future", {"request_id": request_id}, {}, "")
        failed = result.json()
        assert failed.get("category") == "user", (what, result.text[:200])
        assert failed["error"] and "\n" not in failed["error"], (what, failed)
    else:
        assert 400 <= response.status_code < 500, (what, response.status_code, response.text[:200])
    assert httpx.get(f"{server.url}/api/v1/healthz", headers=server.headers).status_code == 200


def test_huge_max_tokens_is_clamped_to_the_context(server: Server) -> None:
    """max_tokens past the context is not refused (recipes pass 4096 to small models): the
    sample stops where the context ends, and the server keeps serving. The prompt fills all but
    ROOM tokens of the context, so the sample ends after ROOM decode steps at most, not ~2,000."""
    room = 8
    tokens = ([1, 2, 3] * MAX_CONTEXT)[: MAX_CONTEXT - room]
    prompt = {"chunks": [{"type": "encoded_text", "tokens": tokens}]}
    body = {
        "num_samples": 1,
        "prompt": prompt,
        "sampling_params": {"max_tokens": 10**9, "seed": 3},
        "base_model": TINY,
    }
    response = _send(server, f"{API}/asample", body, {}, "")
    assert response.status_code == 200, response.text[:200]
    future = {"request_id": response.json()["request_id"]}
    deadline = time.monotonic() + 120
    while "sequences" not in (
        result := _send(server, f"{API}/retrieve_future", future, {}, "").json()
    ):
        assert not {"error", "detail"} & set(result) and time.monotonic() < deadline, result
        time.sleep(0.2)
    (sequence,) = result["sequences"]
    assert 0 < len(sequence["tokens"]) <= room
    assert sequence["stop_reason"] == "stop" or len(sequence["tokens"]) == room, sequence
