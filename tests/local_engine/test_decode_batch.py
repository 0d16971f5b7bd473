"""The shared decode batch: concurrent requests (prompts of different lengths, on one or several
samplers of the same weights) decode together, yet each keeps its own seed, stop rule and
max_tokens, and its logprobs equal a full forward pass over prompt + sample."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import numpy as np
import torch
from tinker import types

from tests.helpers import engine_device

from .conftest import TINY

PROMPTS = [[5, 17, 42], [8, 9, 10, 11, 12, 13, 14, 15, 16], [300], [7, 7, 7, 7, 7], [5, 17, 42]]


def requests() -> list[tuple[list[int], int, types.SamplingParams]]:
    """Varied requests: lengths, sample counts, budgets, seeds and stop tokens all differ."""
    out = []
    for i, prompt in enumerate(PROMPTS):
        stop: list[int] = [] if i % 2 else list(range(40 + 7 * i, 400, 3))  # early, uneven stops
        params = types.SamplingParams(max_tokens=6 + 3 * i, seed=100 + i, stop=stop)
        out.append((prompt, 1 + i, params))
    return out


def full_forward_logprobs(backend: Any, tokens: list[int]) -> np.ndarray:
    (host,) = [h for h in backend.hosts() if h.model_name == TINY]
    with host.use(None) as model, torch.inference_mode():
        ids = torch.tensor([tokens], device=engine_device())
        logits = model(input_ids=ids).logits[0].float()
        lsm = torch.log_softmax(logits[:-1], -1)
        return lsm.gather(-1, ids[0, 1:, None])[:, 0].cpu().numpy()


def test_concurrent_requests_share_steps_and_match_requests_run_alone(backend: Any) -> None:
    samplers = [backend.create_sampling_client(base_model=TINY) for _ in range(2)]
    alone = [
        samplers[0].sample(types.ModelInput.from_ints(p), n, params).result()
        for p, n, params in requests()
    ]
    steps_before = backend.compute.batch.steps
    rows_before = backend.compute.batch.rows_stepped
    futures = [
        samplers[i % 2].sample(types.ModelInput.from_ints(p), n, params)
        for i, (p, n, params) in enumerate(requests())
    ]
    together = [f.result() for f in futures]
    steps = backend.compute.batch.steps - steps_before
    assert (
        backend.compute.batch.rows_stepped - rows_before
    ) / steps > 2  # rows decoded side by side
    for (prompt, n, params), one, joint in zip(requests(), alone, together, strict=True):
        assert len(joint.sequences) == n
        assert [s.tokens for s in joint.sequences] == [s.tokens for s in one.sequences]
        for seq in joint.sequences:
            assert 1 <= len(seq.tokens) <= params.max_tokens
            if seq.stop_reason == "stop":
                assert seq.tokens[-1] in params.stop
            else:
                assert len(seq.tokens) == params.max_tokens
            expected = full_forward_logprobs(backend, prompt + seq.tokens)[len(prompt) - 1 :]
            np.testing.assert_allclose(seq.logprobs, expected, atol=1e-4)
    reasons = {s.stop_reason for r in together for s in r.sequences}
    assert reasons == {"stop", "length"}  # rows left the batch at different steps


def test_compute_logprobs_runs_between_decode_steps(backend: Any) -> None:
    sampler = backend.create_sampling_client(base_model=TINY)
    long = sampler.sample(
        types.ModelInput.from_ints(PROMPTS[1]), 4, types.SamplingParams(max_tokens=30, stop=[])
    )
    scored = sampler.compute_logprobs(types.ModelInput.from_ints(PROMPTS[0])).result()
    expected = full_forward_logprobs(backend, PROMPTS[0])
    np.testing.assert_allclose(scored[1:], expected, atol=1e-5)
    assert len(long.result().sequences) == 4


def test_prompts_arriving_together_are_prefilled_in_one_padded_forward(backend: Any) -> None:
    sampler = backend.create_sampling_client(base_model=TINY)
    prompts = PROMPTS[:4]  # four lengths: left padding and masked positions in one forward
    gate = threading.Event()
    blocker = backend.compute.submit_call(gate.wait)  # the requests queue up behind it
    before = backend.compute.batch.prefills
    params = types.SamplingParams(max_tokens=5, stop=[], seed=3)
    futures = [sampler.sample(types.ModelInput.from_ints(p), 2, params) for p in prompts]
    gate.set()
    blocker.result()
    for prompt, future in zip(prompts, futures, strict=True):
        for seq in future.result().sequences:
            expected = full_forward_logprobs(backend, prompt + seq.tokens)[len(prompt) - 1 :]
            np.testing.assert_allclose(seq.logprobs, expected, atol=1e-4)
    assert backend.compute.batch.prefills - before == 1


def test_requests_of_one_event_loop_iteration_join_the_batch_together(backend: Any) -> None:
    """An RL batch's groups sample from tasks of one asyncio.gather: their requests start
    decoding together however late the compute thread is or how early, so a seeded run repeats
    to the last bit. The first task here holds the loop after submitting (as a loaded machine
    may), giving the compute thread time to start its request alone."""
    sampler = backend.create_sampling_client(base_model=TINY)
    params = types.SamplingParams(max_tokens=4, stop=[], seed=5)
    before = backend.compute.batch.prefills

    async def group(prompt: list[int], hold: float) -> types.SampleResponse:
        future = sampler.sample(types.ModelInput.from_ints(prompt), 2, params)
        time.sleep(hold)
        return await future

    async def both() -> list[types.SampleResponse]:
        return await asyncio.gather(group(PROMPTS[0], 0.5), group(PROMPTS[1], 0))

    responses = asyncio.run(both())
    assert backend.compute.batch.prefills - before == 1  # one forward over both prompts
    assert [len(r.sequences) for r in responses] == [2, 2]
    blocked = sampler.sample(types.ModelInput.from_ints(PROMPTS[2]), 1, params)

    async def blocking() -> types.SampleResponse:  # a loop blocked on a result still gets it
        return sampler.sample(types.ModelInput.from_ints(PROMPTS[2]), 1, params).result(10)

    assert asyncio.run(blocking()).sequences[0].tokens == blocked.result().sequences[0].tokens


def test_compute_logprobs_submitted_together_are_scored_together_each_as_alone(
    backend: Any,
) -> None:
    """Requests submitted before any is looked at run as one batch per weights, in shared
    micro-batches (rows that start alike run their prefix once), whatever the compute thread is
    doing meanwhile; a snapshot's weights get a batch of their own. Each result equals a full
    forward pass of its sequence."""
    sampler = backend.create_sampling_client(base_model=TINY)
    same_weights = backend.create_sampling_client(base_model=TINY)
    client = backend.create_lora_training_client(TINY, rank=4)
    snapshot = client.save_weights_and_get_sampling_client()
    header = list(range(30, 50))  # 20 tokens: a shared prefix
    sequences = [[*header, 1, 2, 3], [*header, 4, 5], [7, 8, 9, 10], [300], PROMPTS[1]]
    scorers = [sampler, same_weights, snapshot, sampler, same_weights]
    before = backend.compute.scorings
    futures = [
        scorer.compute_logprobs(types.ModelInput.from_ints(s))
        for scorer, s in zip(scorers, sequences, strict=True)
    ]
    time.sleep(0.05)  # an idle compute thread does not start them early
    assert backend.compute.scorings == before and not any(f._inner.done() for f in futures)
    together = [f.result() for f in futures]
    assert backend.compute.scorings - before == 2  # the base's four, the snapshot's one
    for sequence, scored in zip(sequences, together, strict=True):
        assert len(scored) == len(sequence) and scored[0] is None
        if len(sequence) > 1:  # B = 0: the fresh snapshot scores as the base does
            expected = full_forward_logprobs(backend, sequence)
            np.testing.assert_allclose(scored[1:], expected, atol=1e-5)


def test_held_score_requests_run_before_work_submitted_after_them(backend: Any) -> None:
    sampler = backend.create_sampling_client(base_model=TINY)
    future = sampler.compute_logprobs(types.ModelInput.from_ints(PROMPTS[1]))
    seen = backend.compute.submit_call(lambda: future._inner.done()).result()
    assert seen  # queued before the call, so already scored when it ran
    assert len(future.result()) == len(PROMPTS[1])


class SharesHere:
    """decode_batch.Spread over `size` shares in this one process: what the ranks of a --nproc N
    run do with their shares (each a CacheRows), without the processes or their collectives."""

    def __init__(self, sampler: Any, size: int) -> None:
        from kitchen.adapters.local.sample.decode_batch import CacheRows

        self.sampler, self.size = sampler, size
        self.rows = [CacheRows() for _ in range(size - 1)]
        self.forwards = [0] * size  # forwards each share ran with rows of its own

    def tick(self, own: Any, ops: list[list[Any]]) -> list[Any]:
        with self.sampler.weights() as model, torch.inference_mode():
            out = [own(model)] + [r.run(model, o) for r, o in zip(self.rows, ops, strict=True)]
        for s, logits in enumerate(out):
            self.forwards[s] += logits is not None
        return out

    def settle(self, ops: list[list[Any]]) -> None:
        for rows, share_ops in zip(self.rows, ops, strict=True):
            rows.run(None, share_ops)


def test_a_batch_spread_over_shares_samples_what_one_batch_samples(backend: Any) -> None:
    """Spread sampling (docs/distributed.md) with the ranks' shares in one process: every share
    decodes rows of its own, yet each request's tokens are those of the one batch, its logprobs
    within the last bits (its rows decode beside other rows), its prompt scored on rank 0's share;
    the other shares' caches are freed when the batch ends."""
    sampler = backend.create_sampling_client(base_model=TINY)
    spread = SharesHere(sampler, 3)
    sampler._spread = spread
    one = backend.create_sampling_client(base_model=TINY)
    scored = types.SamplingParams(max_tokens=5, seed=9, stop=[])

    def run(client: Any) -> list[types.SampleResponse]:
        gate = threading.Event()
        blocker = backend.compute.submit_call(gate.wait)  # the requests join together
        futures = [
            client.sample(types.ModelInput.from_ints(p), n, params) for p, n, params in requests()
        ]
        futures.append(client.sample(types.ModelInput.from_ints(PROMPTS[1]), 2, scored, True))
        gate.set()
        blocker.result()
        return [f.result() for f in futures]

    together, spread_out = run(one), run(sampler)
    # The last step resolves the futures, then settles the shares: a call after it sees both.
    backend.compute.submit_call(lambda: None).result()
    assert all(n > 0 for n in spread.forwards)  # every share decoded rows of its own
    assert all(rows.cache is None for rows in spread.rows)
    prompts = [p for p, _, _ in requests()] + [PROMPTS[1]]
    for prompt, joint, dealt in zip(prompts, together, spread_out, strict=True):
        assert [s.tokens for s in dealt.sequences] == [s.tokens for s in joint.sequences]
        for seq in dealt.sequences:
            expected = full_forward_logprobs(backend, prompt + seq.tokens)[len(prompt) - 1 :]
            np.testing.assert_allclose(seq.logprobs, expected, atol=1e-4)
    np.testing.assert_allclose(
        spread_out[-1].prompt_logprobs[1:], together[-1].prompt_logprobs[1:], atol=1e-5
    )
