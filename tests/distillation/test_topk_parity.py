"""The top-K soft-target datums equal tinker-cookbook 0.6.1's on the same teacher output: SDFT's
`build_topk_distillation_datums` (completions on the teacher's own prompt) and off-policy
distillation's `_collect_topk_for_datum` (fixed data), field by field. The teacher is a replay of
fixed responses, with the awkward cases in them (no entries at a position, ids past the
vocabulary, fewer than K entries), and once the tiny model's own top-K through the local engine."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest
from tinker import types

from tests.helpers import local_backend
from train_core.distillation.topk import (
    build_topk_distillation_datums,
    sequence_topk_datum,
    teacher_forcing,
)
from train_core.scoring import full_sequence

cookbook_sdft = pytest.importorskip("tinker_cookbook.distillation.sdft")
cookbook_off_policy = pytest.importorskip("tinker_cookbook.distillation.train_off_policy")

K = 4
VOCAB = 50


class _Done:
    """A finished call, awaitable both ways the cookbook awaits one (`.coroutine()` and `await`)."""

    def __init__(self, value: Any) -> None:
        self.value = value

    async def coroutine(self) -> Any:
        return self.value

    def __await__(self) -> Any:
        return self.coroutine().__await__()


class ReplayTeacher:
    """Answers sample(..., topk_prompt_logprobs=K) from a function of the prompt's tokens, and
    records what it was asked."""

    def __init__(self, topk_of: Any) -> None:
        self.topk_of = topk_of
        self.prompts: list[list[int]] = []

    def sample(
        self, prompt: types.ModelInput, num_samples: int, sampling_params: Any, **kw: Any
    ) -> _Done:
        assert kw["include_prompt_logprobs"] and sampling_params.max_tokens == 1
        tokens = prompt.to_ints()
        self.prompts.append(tokens)
        top = self.topk_of(tokens, kw["topk_prompt_logprobs"])
        seq = types.SampledSequence(
            stop_reason="length", sequence_id="replay", _tokens_list=[0], _logprobs_list=[0.0]
        )
        return _Done(types.SampleResponse(sequences=[seq], _topk_prompt_logprobs_list=top))


def awkward_topk(tokens: list[int], k: int) -> list[list[tuple[int, float]] | None]:
    """A deterministic top-K per position with every case the builders handle."""
    rng = np.random.default_rng(sum(tokens) + len(tokens))
    rows: list[list[tuple[int, float]] | None] = [None]
    for t in range(1, len(tokens)):
        n = k if t % 5 else k - 2  # fewer than K entries
        ids = rng.choice(VOCAB + 6, size=n, replace=False)  # some past the vocabulary
        if t % 7 == 0:
            ids = np.arange(VOCAB, VOCAB + n)  # only ids past it: nothing left
        lps = np.sort(rng.normal(-2.0, 1.5, size=n))[::-1]
        rows.append([(int(i), float(lp)) for i, lp in zip(ids, lps, strict=True)])
    return rows


def rl_datum(prompt: list[int], completion: list[int]) -> types.Datum:
    """An RL datum as assemble_training_data writes it: mask 1 on the completion's targets."""
    tokens = [*prompt, *completion]
    n = len(tokens) - 1
    mask = np.zeros(n, dtype=np.float32)
    mask[len(prompt) - 1 :] = 1.0
    return types.Datum(
        model_input=types.ModelInput.from_ints(tokens[:-1]),
        loss_fn_inputs={
            "target_tokens": types.TensorData.from_numpy(np.asarray(tokens[1:], dtype=np.int64)),
            "logprobs": types.TensorData.from_numpy(np.full(n, -1.0, dtype=np.float32)),
            "advantages": types.TensorData.from_numpy(np.zeros(n, dtype=np.float32)),
            "mask": types.TensorData.from_numpy(mask),
        },
    )


def sft_datum(tokens: list[int], n_prompt: int) -> types.Datum:
    n = len(tokens) - 1
    weights = np.zeros(n, dtype=np.float32)
    weights[n_prompt - 1 :] = 1.0
    return types.Datum(
        model_input=types.ModelInput.from_ints(tokens[:-1]),
        loss_fn_inputs={
            "target_tokens": types.TensorData.from_numpy(np.asarray(tokens[1:], dtype=np.int64)),
            "weights": types.TensorData.from_numpy(weights),
        },
    )


def assert_same_datums(ours: list[types.Datum], theirs: list[types.Datum]) -> None:
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs, strict=True):
        assert a.model_input.to_ints() == b.model_input.to_ints()
        assert set(a.loss_fn_inputs) == set(b.loss_fn_inputs) == {"target_tokens", "weights"}
        for key in ("target_tokens", "weights"):
            x, y = a.loss_fn_inputs[key], b.loss_fn_inputs[key]
            assert (x.dtype, x.shape) == (y.dtype, y.shape), key
        np.testing.assert_array_equal(
            a.loss_fn_inputs["target_tokens"].to_numpy(),
            b.loss_fn_inputs["target_tokens"].to_numpy(),
        )
        np.testing.assert_allclose(
            a.loss_fn_inputs["weights"].to_numpy(), b.loss_fn_inputs["weights"].to_numpy(),
            rtol=2e-6, atol=1e-7,
        )  # fmt: skip


def sdft_batch() -> tuple[list[types.Datum], list[dict[str, int]], list[types.ModelInput]]:
    rng = np.random.default_rng(0)
    prompts_P = [rng.integers(1, VOCAB, size=n).tolist() for n in (5, 9)]
    completions = [rng.integers(1, VOCAB, size=n).tolist() for n in (12, 2, 7, 20)]
    data_D = [rl_datum(prompts_P[i // 2], c) for i, c in enumerate(completions)]
    meta_D = [{"group_idx": i // 2, "traj_idx": i % 2} for i in range(4)]
    # the teacher's prompts: the student's with a "demonstration" of a few tokens in front
    teacher_P = [types.ModelInput.from_ints([3, 4, 5, *p]) for p in prompts_P]
    return data_D, meta_D, teacher_P


@pytest.mark.parametrize(
    ("max_context", "vocab", "skip"),
    [(32768, VOCAB, 3), (20, None, 0), (14, VOCAB, 1), (8, VOCAB, 3)],
)
def test_sdft_topk_datums_equal_the_cookbooks(
    max_context: int, vocab: int | None, skip: int
) -> None:
    data_D, meta_D, teacher_P = sdft_batch()
    ours_teacher, theirs_teacher = ReplayTeacher(awkward_topk), ReplayTeacher(awkward_topk)
    ours, our_metrics = asyncio.run(
        build_topk_distillation_datums(
            data_D, meta_D, ours_teacher, teacher_P, K, max_context, vocab, skip
        )
    )
    theirs, their_metrics = asyncio.run(
        cookbook_sdft.build_topk_distillation_datums(
            data_D, meta_D, theirs_teacher, teacher_P, K, max_context, vocab, skip
        )
    )
    assert ours_teacher.prompts == theirs_teacher.prompts
    assert_same_datums(ours, theirs)
    assert set(our_metrics) == {k.removeprefix("sdft/") for k in their_metrics}
    for key, value in their_metrics.items():
        assert our_metrics[key.removeprefix("sdft/")] == pytest.approx(value, rel=1e-5), key
    weighted = sum(float((d.loss_fn_inputs["weights"].to_numpy() > 0).sum()) for d in ours)
    if max_context <= 12:  # no room after either teacher prompt: every completion is cut away
        assert (weighted, our_metrics["teacher_truncated_count"]) == (0.0, 4.0)
    else:  # the cases above leave some targets: the comparison compares something
        assert weighted > 0


def test_a_completion_past_the_teachers_context_is_cut_and_counted() -> None:
    data_D, _, teacher_P = sdft_batch()
    forcing = teacher_forcing(data_D[3], teacher_P[1], max_context_length=15)
    assert (forcing.prompt_len, forcing.completion_len, forcing.truncated) == (12, 3, True)
    assert forcing.model_input.length == 15


def test_off_policy_topk_datums_equal_the_cookbooks() -> None:
    rng = np.random.default_rng(1)
    data_D = [
        sft_datum(rng.integers(1, VOCAB, size=n).tolist(), p) for n, p in ((10, 4), (16, 1), (6, 5))
    ]

    def full_topk(tokens: list[int], k: int) -> list[list[tuple[int, float]] | None]:
        rows = awkward_topk(tokens, k)
        return [rows[0]] + [r or [(1, -0.5)] for r in rows[1:]]

    for datum in data_D:
        top = full_topk(full_sequence(datum).to_ints(), K)
        theirs = asyncio.run(
            cookbook_off_policy._collect_topk_for_datum(ReplayTeacher(full_topk), datum, K)
        )
        assert_same_datums([sequence_topk_datum(datum, top, K)], [theirs])


@pytest.mark.slow
def test_sdft_topk_datums_equal_the_cookbooks_on_the_tiny_models_output(tmp_path: Any) -> None:
    """The real teacher: kitchen/tiny-llama's top-K prompt logprobs through the local engine,
    recorded once and replayed to both builders."""
    data_D, meta_D, teacher_P = sdft_batch()
    with local_backend(tmp_path) as backend:
        client = backend.create_sampling_client(base_model="kitchen/tiny-llama")
        recorded: dict[tuple[int, ...], Any] = {}

        def real_topk(tokens: list[int], k: int) -> Any:
            key = tuple(tokens)
            if key not in recorded:
                params = types.SamplingParams(max_tokens=1)
                out = client.sample(
                    types.ModelInput.from_ints(tokens), 1, params,
                    include_prompt_logprobs=True, topk_prompt_logprobs=k,
                ).result()  # fmt: skip
                recorded[key] = out.topk_prompt_logprobs
            return recorded[key]

        ours, _ = asyncio.run(
            build_topk_distillation_datums(data_D, meta_D, ReplayTeacher(real_topk), teacher_P, K)
        )
        theirs, _ = asyncio.run(
            cookbook_sdft.build_topk_distillation_datums(
                data_D, meta_D, ReplayTeacher(real_topk), teacher_P, K
            )
        )
    assert_same_datums(ours, theirs)
    weights = np.concatenate([d.loss_fn_inputs["weights"].to_numpy().sum(-1) for d in ours])
    assert np.allclose(weights[weights > 0], 1.0, atol=1e-5)  # each kept row is a distribution
