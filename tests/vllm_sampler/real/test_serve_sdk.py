"""`kitchen serve --sampler vllm` through the unmodified Tinker SDK (`make test-vllm`): seeds,
stops, sampled and prompt logprobs, and two LoRA tenants sampling at once, each from its own
adapter. One `kitchen serve` (and so one vLLM start-up, minutes on a busy 2-core machine) for the
module, the one start of `make test-vllm`: serve samples through the same LocalBackend as
`kitchen run --sampler vllm`. It showed its progress line, and at the end no process it started is
left.

Both sides compute in float32 on every machine (`--dtype float32`): where the CPU has bf16 units
`--dtype auto` is bf16, and bf16's rounding alone puts vLLM's sampled logprobs a mean 1.4e-3 (base)
to 2.6e-2 (a trained tenant) from the engine's, while a LoRA scale 25% off gives 5.8e-2: too close
for a bound to tell apart. In float32 the same gaps are below 1e-6 and that scale error gives 0.16
(docs/sampling.md, "The logprob gap")."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tinker
from tinker import types

from kitchen.adapters.vllm.server import find_python
from kitchen.engine.errors import ConfigError
from tests.tinker_backend.conftest import TEST_KEY, TEXTS, TINY, serve_process, sft_datum

pytestmark = pytest.mark.vllm

PROMPT = types.ModelInput.from_ints([3, 10, 20, 30, 40])
# Temperature 1: the sampled logprob is the model's own, which compute_logprobs gives.
FREE = types.SamplingParams(max_tokens=12, temperature=1.0, seed=7, stop=[])
# The same math summed in another order: measured (docs/sampling.md) a mean gap of at most 5.3
# float32 epsilons and a largest of 23, against means of 0.12-0.44 for a LoRA scale 5% to 2x off,
# 0.74 for an adapter left out and 6.4 for another tenant's; the bounds leave 19x and 43x of room
# for other CPUs' kernels.
EPS = float(np.finfo(np.float32).eps)
MEAN_GAP, MAX_GAP = 100 * EPS, 1000 * EPS


def _tokenizer() -> Any:
    """The tiny model's tokenizer (the SDK's get_tokenizer would look it up on the hub)."""
    from transformers import AutoTokenizer

    from kitchen.adapters.local import resolve_model

    return AutoTokenizer.from_pretrained(str(resolve_model(TINY)))


def _children(pid: int) -> list[int]:
    """Every process whose parent is `pid` (vLLM's leader runs in a session of its own)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def _serve_pid(checkpoints: Path) -> int:
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue
        if b"serve" in args and str(checkpoints).encode() in args:
            return int(cmdline.parent.name)
    raise AssertionError(f"no kitchen serve process with --checkpoint-dir {checkpoints}")


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.fixture(scope="module")
def vllm_serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    try:
        find_python(None)
    except ConfigError as e:
        pytest.skip(str(e))
    checkpoints = tmp_path_factory.mktemp("vllm-serve")
    args = ["--sampler", "vllm", "--vllm-max-lora-rank", "16", "--session-timeout", "300"]
    args += ["--dtype", "float32"]
    # vLLM loads before the server answers: its start-up is the wait (70-400 s on 2 busy cores).
    with serve_process([TINY], checkpoints, extra_args=args, start_timeout=900) as url:
        started = _children(_serve_pid(checkpoints))
        with pytest.MonkeyPatch.context() as env:
            env.setenv("TINKER_API_KEY", TEST_KEY)
            env.setenv("TINKER_BASE_URL", url)
            yield url
    assert started, "kitchen serve started no vLLM process"
    assert re.search(r"vLLM: \S+ ready in \d+ s", (checkpoints / "serve.log").read_text())
    # Kitchen stops every process it started (the SIGTERM goes to vLLM's whole process group).
    assert not [pid for pid in started if _alive(pid)]


@pytest.fixture
def service(vllm_serve: str) -> Iterator[Any]:
    client = tinker.ServiceClient()
    yield client
    client.close("success").result()


def _tokens(sampler: Any, params: types.SamplingParams, n: int = 2) -> list[list[int]]:
    return [list(s.tokens) for s in sampler.sample(PROMPT, n, params).result().sequences]


def _gaps(sampler: Any, response: types.SampleResponse) -> np.ndarray:
    """|vLLM's sampled logprob - the local engine's on `sampler`'s weights| of every token."""
    diffs: list[float] = []
    for seq in response.sequences:
        full = types.ModelInput.from_ints(PROMPT.to_ints() + list(seq.tokens))
        engine = sampler.compute_logprobs(full).result()[PROMPT.length :]
        diffs += [abs(a - b) for a, b in zip(engine, seq.logprobs or [], strict=True)]
    return np.asarray(diffs)


def _assert_close(gaps: np.ndarray, what: str) -> None:
    assert gaps.mean() < MEAN_GAP and gaps.max() < MAX_GAP, (
        f"{what}: logprob gap mean {gaps.mean():.2e} (bound {MEAN_GAP:.1e}), "
        f"max {gaps.max():.2e} (bound {MAX_GAP:.1e})"
    )


def test_seeds_stops_and_logprobs_through_the_sdk(service: Any) -> None:
    sampler = service.create_sampling_client(base_model=TINY).result()
    tokenizer = _tokenizer()

    # Seeds: the same seed gives the same tokens; every bit of a 64-bit seed counts.
    first = _tokens(sampler, FREE)
    assert _tokens(sampler, FREE) == first
    assert _tokens(sampler, FREE.model_copy(update={"seed": 8})) != first
    assert _tokens(sampler, FREE.model_copy(update={"seed": 2**40 + 7})) != first
    with pytest.raises(tinker.RequestFailedError, match=r"seed is 18446744073709551616; expected"):
        _tokens(sampler, FREE.model_copy(update={"seed": 2**64}))
    with pytest.raises(tinker.RequestFailedError, match="top_p"):
        _tokens(sampler, FREE.model_copy(update={"top_p": 0.9}))

    # A stop token ends the sample at its first occurrence and stays in it.
    free = first[0]
    stop_id = free[6]
    stopped = sampler.sample(PROMPT, 1, FREE.model_copy(update={"stop": [stop_id]})).result()
    assert list(stopped.sequences[0].tokens) == free[: free.index(stop_id) + 1]
    assert stopped.sequences[0].stop_reason == "stop"
    # A stop string ends it at the token that completes the string.
    stop_text = tokenizer.decode(free[5:7])
    by_text = sampler.sample(PROMPT, 1, FREE.model_copy(update={"stop": [stop_text]})).result()
    seq = by_text.sequences[0]
    assert seq.stop_reason == "stop"
    assert stop_text in tokenizer.decode(seq.tokens)
    assert stop_text not in tokenizer.decode(seq.tokens[:-1])

    # Sampled logprobs are the model's, as the local engine computes them on the same weights;
    # prompt logprobs (sample's and compute_logprobs) are the engine's own.
    response = sampler.sample(PROMPT, 3, FREE, include_prompt_logprobs=True).result()
    assert all(len(s.logprobs or []) == len(s.tokens) == 12 for s in response.sequences)
    _assert_close(_gaps(sampler, response), "base")
    scored = sampler.compute_logprobs(PROMPT).result()
    assert len(scored) == PROMPT.length and scored[0] is None
    assert all(lp is not None and lp < 0 for lp in scored[1:])
    assert response.prompt_logprobs is not None
    assert response.prompt_logprobs[1:] == pytest.approx(scored[1:], rel=1e-5)


def _tenant(text: str, rank: int, seed: int) -> tuple[Any, Any]:
    """A tenant of its own (a ServiceClient) with an adapter trained on `text`; its snapshot."""
    service = tinker.ServiceClient()
    training = service.create_lora_training_client(TINY, rank=rank, seed=seed).result()
    tokens = _tokenizer().encode(text, add_special_tokens=False)
    for _ in range(4):
        training.forward_backward([sft_datum(tokens)], "cross_entropy")
        training.optim_step(types.AdamParams(learning_rate=5e-2)).result()
    return service, training.save_weights_and_get_sampling_client().result()


def test_two_lora_tenants_sample_their_own_adapters_at_once(service: Any) -> None:
    base = service.create_sampling_client(base_model=TINY).result()
    (service_a, a), (service_b, b) = _tenant(TEXTS[0], 8, 1), _tenant(TEXTS[1], 16, 2)
    try:
        alone = {"a": a.sample(PROMPT, 2, FREE).result(), "b": b.sample(PROMPT, 2, FREE).result()}
        together: dict[str, types.SampleResponse] = {}

        def sample(name: str, sampler: Any) -> None:
            together[name] = sampler.sample(PROMPT, 2, FREE).result()

        threads = [
            threading.Thread(target=sample, args=("a", a)),
            threading.Thread(target=sample, args=("b", b)),
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=600)
        on_base = _tokens(base, FREE)
        # Each tenant's logprobs are those of its own weights (the local engine scores them):
        # an adapter mixed up with the other's, or the base, would be far off.
        gaps = {name: _gaps(sampler, together[name]) for name, sampler in (("a", a), ("b", b))}
        # The measure tells them apart: b's samples scored on a's weights are far off.
        mixed_up = _gaps(a, together["b"])
        # A rank above the server's --vllm-max-lora-rank is refused when the client is made.
        with pytest.raises(Exception, match="--vllm-max-lora-rank"):
            service.create_lora_training_client(TINY, rank=32).result()
    finally:
        service_a.close("success").result()
        service_b.close("success").result()

    def tokens(response: types.SampleResponse) -> list[list[int]]:
        return [list(s.tokens) for s in response.sequences]

    assert {k: tokens(v) for k, v in together.items()} == {k: tokens(v) for k, v in alone.items()}
    assert tokens(alone["a"]) != tokens(alone["b"])
    assert on_base not in (tokens(alone["a"]), tokens(alone["b"]))
    for name, tenant_gaps in gaps.items():
        _assert_close(tenant_gaps, f"tenant {name}")
    assert mixed_up.mean() > 1000 * MEAN_GAP
