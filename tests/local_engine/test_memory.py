"""The memory levers change what a pass keeps, never what it computes: activation checkpointing and
padding-free (packed) micro-batches give the plain path's losses, logprobs and gradients (LoRA on a
frozen base, full fine-tuning, shared-prefix passes, SFT, DPO and RL losses), and a pass that
cannot fit is refused before any work, in one line."""

from __future__ import annotations

import importlib.util
import itertools
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

import numpy as np
import pytest
import torch
from tinker import types

from kitchen.adapters.local import create_local_backend
from kitchen.adapters.local.model import attention
from kitchen.adapters.local.model.lora import adapter_parameters
from kitchen.adapters.local.model.settings import EngineSettings
from kitchen.adapters.local.train import batching, memory
from kitchen.adapters.local.train.forward import run_builtin_loss, run_custom_loss
from kitchen.adapters.local.train.pass_settings import PassSettings
from kitchen.engine.errors import BackendError, ConfigError
from kitchen.ports import BackendSettings
from tests.helpers import engine_device, engine_generator, local_backend
from train_core.preference.dpo import make_dpo_loss_fn

from .conftest import TINY, take_grads
from .test_builtin_grads import rl_data
from .test_shared_prefix import CPU, GROUPS, WEIGHTS, group_data

# Rows of mixed lengths, as an SFT batch has: padded, the short ones carry most of a pass's padding.
# No two share a prefix, so none runs as a shared-prefix group.
MIXED = [
    (list(range(50 * k + 3, 50 * k + 3 + n)), [7, 8, 9])
    for k, n in enumerate((40, 5, 17, 2, 29, 11))
]


def randomised(client: Any, seed: int) -> None:
    """A non-zero adapter (B = 0 would leave A without a gradient), the same whatever ran before."""
    generator = engine_generator(seed)
    with torch.no_grad():
        for p in adapter_parameters(client.host.model, client.adapter).values():
            p.normal_(0.0, 0.05, generator=generator)


@contextmanager
def counting_layer_calls(model: Any) -> Iterator[list[int]]:
    """How many times the first decoder layer's forward ran inside the block."""
    layer = memory.decoder_layers(model)[0]
    calls = [0]
    original = type(layer).forward

    def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
        if self is layer:
            calls[0] += 1
        return original(self, *args, **kwargs)

    type(layer).forward = counted
    try:
        yield calls
    finally:
        type(layer).forward = original


def run(client: Any, data: list[types.Datum], loss_fn: str, **options: Any) -> tuple[Any, Any]:
    """The engine's output and the gradients it left (taken off the parameters)."""
    with client.host.use(client.adapter) as model:
        out = run_builtin_loss(model, data, loss_fn, None, True, PassSettings(512, **options))
    return out, grads_of(client)


def grads_of(client: Any) -> dict[str, Any]:
    if client.adapter is not None:
        return take_grads(client)
    params = dict(client.host.base.named_parameters())
    out = {k: p.grad.detach().clone() for k, p in params.items() if p.grad is not None}
    for p in params.values():
        p.grad = None
    return out


def assert_same(got: tuple[Any, Any], want: tuple[Any, Any], tol: float = 1e-6) -> None:
    """Loss, logprobs and gradients within `tol`: absolute for logprobs, relative to the loss and to
    each gradient tensor's largest entry (fp32 sums in another order differ in the last bits)."""
    (out, grads), (want_out, want_grads) = got, want
    assert out.metrics["loss:sum"] == pytest.approx(want_out.metrics["loss:sum"], rel=tol, abs=tol)
    for o, w in zip(out.loss_fn_outputs, want_out.loss_fn_outputs, strict=True):
        np.testing.assert_allclose(o["logprobs"].to_numpy(), w["logprobs"].to_numpy(), atol=tol)
    assert grads.keys() == want_grads.keys() and grads
    for key, want_grad in want_grads.items():
        scale = max(float(want_grad.abs().max()), 1.0)
        torch.testing.assert_close(grads[key], want_grad, rtol=0.0, atol=tol * scale)


# -- activation checkpointing -----------------------------------------------------------------------


@pytest.mark.parametrize("loss_fn", ["cross_entropy", "importance_sampling", "ppo"])
def test_checkpointing_gradients_equal_plain_with_lora(backend: Any, loss_fn: str) -> None:
    client = backend.create_lora_training_client(TINY, rank=4, seed=3)
    randomised(client, 0)
    data = rl_data(loss_fn)
    plain = run(client, data, loss_fn, checkpointing="off")
    with client.host.use(client.adapter) as model, counting_layer_calls(model) as calls:
        recomputed = run(client, data, loss_fn, checkpointing="on")
    assert calls[0] == 2  # its forward, and again in backward: the activations were not kept
    assert_same(recomputed, plain)
    client.close()


def test_checkpointing_gradients_equal_plain_in_full_fine_tuning(backend: Any) -> None:
    client = backend.create_lora_training_client(TINY, rank=0, seed=3)
    data = rl_data("importance_sampling")
    plain = run(client, data, "importance_sampling", checkpointing="off")
    recomputed = run(client, data, "importance_sampling", checkpointing="on")
    assert len(plain[1]) > 10  # every base weight trains
    assert_same(recomputed, plain)
    client.close()


@pytest.mark.parametrize("loss_fn", ["cross_entropy", "importance_sampling"])
def test_checkpointing_gradients_equal_plain_in_shared_prefix_passes(
    backend: Any, loss_fn: str
) -> None:
    """The prefix pass writes a KV cache the rows' pass reads; the recompute replays it."""
    client = backend.create_lora_training_client(TINY, rank=4, seed=5)
    randomised(client, 1)
    data = group_data(loss_fn, GROUPS)
    plain = run(client, data, loss_fn, checkpointing="off")
    with client.host.use(client.adapter) as model, counting_layer_calls(model) as calls:
        recomputed = run(client, data, loss_fn, checkpointing="on")
        plan = batching.plan_microbatches(
            data, batching.TARGETS_ONLY, 512, batching.BatchTarget(engine_device())
        )
    assert any(mb.shared for mb in plan)
    assert calls[0] > 2  # the prefix and the rows' pass, each run again in backward
    assert_same(recomputed, plain)
    client.close()


def test_checkpointing_leaves_passes_without_grad_alone(backend: Any) -> None:
    client = backend.create_lora_training_client(TINY, rank=4, seed=3)
    with client.host.use(client.adapter) as model, counting_layer_calls(model) as calls:
        with memory.activation_checkpointing(model, True), torch.no_grad():
            model(input_ids=torch.tensor([[5, 6, 7]], device=client.host.device))
        assert calls[0] == 1
        assert "forward" not in memory.decoder_layers(model)[0].__dict__  # unwrapped after
    client.close()


# -- padding-free micro-batches --------------------------------------------------------------------


@pytest.mark.parametrize("loss_fn", ["cross_entropy", "importance_sampling"])
def test_packed_equals_padded(backend: Any, loss_fn: str) -> None:
    client = backend.create_lora_training_client(TINY, rank=4, seed=3)
    randomised(client, 2)
    data = rl_data(loss_fn, MIXED, seed=4)
    padded = run(client, data, loss_fn, packed=False)
    packed = run(client, data, loss_fn, packed=True)
    assert_same(packed, padded, tol=1e-5)
    both = run(client, data, loss_fn, packed=True, checkpointing="on")
    assert_same(both, padded, tol=1e-5)
    client.close()


def test_packed_plan_lays_rows_end_to_end_with_positions_restarting() -> None:
    data = rl_data("cross_entropy", MIXED)
    lengths = [len(d.model_input.to_ints()) for d in data]
    plan = batching.plan_microbatches(data, WEIGHTS, 64, CPU, packed=True)
    assert all(mb.host_tokens.shape[0] == 1 for mb in plan)
    assert all(mb.host_tokens.size <= 64 for mb in plan if len(mb.indices) > 1)
    assert sorted(i for mb in plan for i in mb.indices) == list(range(len(data)))
    for mb in plan:
        positions = mb.position_ids.cpu().numpy()[0]
        for i, row, start, n in mb.spans():
            assert row == 0 and n == lengths[i]
            np.testing.assert_array_equal(positions[start : start + n], np.arange(n))
            np.testing.assert_array_equal(
                mb.host_tokens[0, start : start + n], data[i].model_input.to_ints()
            )
    padded = batching.plan_microbatches(data, WEIGHTS, 64, CPU)
    tally_packed, tally_padded = memory.PaddingTally(), memory.PaddingTally()
    tally_packed.add(plan)
    tally_padded.add(padded)
    assert tally_packed.take() == {"train/padding_fraction": 0.0}
    assert tally_padded.take()["train/padding_fraction"] > 0.1


def test_packed_plans_keep_only_groups_that_save_more_than_their_passes_cost() -> None:
    """A shared-prefix group costs two decoder calls of its own; in a packed plan its rows would
    join the packed row instead, so only a group saving PACKED_MIN_SAVING tokens stays one (a long
    RL prompt's samples); rows sharing a short prompt (SFT's chat header) are packed."""
    long_prompt, short_prompt = list(range(100, 200)), list(range(300, 320))
    pairs = [(long_prompt, [k, k + 1]) for k in range(3)]
    pairs += [
        (short_prompt, list(range(400 + 10 * k, 400 + 10 * k + n))) for k, n in ((0, 9), (1, 5))
    ]
    data = rl_data("cross_entropy", pairs)
    tokens_N = [d.model_input.to_ints() for d in data]
    assert sorted(sorted(rows) for rows, _ in batching.prefix_groups(tokens_N, 512)) == [
        [0, 1, 2],
        [3, 4],
    ]
    for packed, kept in ((False, [[0, 1, 2], [3, 4]]), (True, [[0, 1, 2]])):
        plan = batching.plan_microbatches(data, WEIGHTS, 512, CPU, packed=packed)
        grouped = [sorted(mb.indices[r] for r in rows) for mb in plan for rows, _ in mb.shared]
        assert sorted(grouped) == kept
    packed_rows = [mb for mb in plan if mb.position_ids is not None]
    assert [sorted(mb.indices) for mb in packed_rows] == [[3, 4]]


def test_packed_dpo_equals_padded(backend: Any) -> None:
    """DPO's custom loss: its gradients go back through packed micro-batches as through padded."""
    client = backend.create_lora_training_client(TINY, rank=4, seed=3)
    randomised(client, 3)
    data = rl_data("cross_entropy", MIXED[:4], seed=5)  # [chosen_0, rejected_0, chosen_1, ...]
    loss = make_dpo_loss_fn([-3.0, -4.0, -20.0, -1.0], beta=0.5)
    outs = {}
    for packed in (False, True):
        with client.host.use(client.adapter) as model:
            out = run_custom_loss(model, data, loss, PassSettings(512, packed=packed))
        outs[packed] = (out, grads_of(client))
    assert_same(outs[True], outs[False], tol=1e-5)
    client.close()


@contextmanager
def spying_attention() -> Iterator[dict[str, list[Any]]]:
    """The engine's attention masks built, and its attention calls (the mask, the row lengths),
    inside the block."""
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS

    seen: dict[str, list[Any]] = {"masks": [], "calls": []}
    build_mask = ALL_MASK_ATTENTION_FUNCTIONS[attention.NAME]
    attend = AttentionInterface._global_mapping[attention.PACKED]

    def mask(**kwargs: Any) -> Any:
        seen["masks"].append(kwargs["q_length"])
        return build_mask(**kwargs)

    def spy(module: Any, q: Any, k: Any, v: Any, mask: Any, **kwargs: Any) -> Any:
        seen["calls"].append((mask, kwargs.get(attention.ROW_LENGTHS)))
        return attend(module, q, k, v, mask, **kwargs)

    saved = ALL_MASK_ATTENTION_FUNCTIONS._global_mapping[attention.NAME]
    ALL_MASK_ATTENTION_FUNCTIONS._global_mapping[attention.NAME] = mask
    AttentionInterface._global_mapping[attention.NAME] = spy
    AttentionInterface._global_mapping[attention.PACKED] = spy
    try:
        yield seen
    finally:
        ALL_MASK_ATTENTION_FUNCTIONS._global_mapping[attention.NAME] = saved
        AttentionInterface._global_mapping[attention.NAME] = attend
        AttentionInterface._global_mapping[attention.PACKED] = attend


def test_packed_passes_build_no_mask_and_attend_per_datum(backend: Any) -> None:
    """transformers would build a block-diagonal [T, T] mask from the restarting positions (which
    rules out flash kernels); the engine's packed passes build none, and every layer (again in a
    checkpointed recompute) attends per datum."""
    client = backend.create_lora_training_client(TINY, rank=4, seed=3)
    data = rl_data("cross_entropy", MIXED)
    lengths = {tuple(mb.lengths) for mb in plan_of(data, packed=True)}
    with spying_attention() as seen:
        run(client, data, "cross_entropy", packed=True, checkpointing="on")
    assert seen["masks"] == []
    assert {rows for _, rows in seen["calls"]} == lengths
    assert all(mask is None for mask, _ in seen["calls"])
    with spying_attention() as seen:
        run(client, data, "cross_entropy", packed=False)
    assert seen["masks"] and {rows for _, rows in seen["calls"]} == {None}
    client.close()


def plan_of(data: list[types.Datum], packed: bool) -> list[batching.MicroBatch]:
    return batching.plan_microbatches(data, batching.TARGETS_ONLY, 512, CPU, packed=packed)


def varlen_stand_in(signature: str, calls: list[dict[str, Any]]) -> Any:
    """A CPU stand-in for torch's CUDA-only varlen_attn (SDPA per sequence of the packed layout),
    with the `signature` of torch 2.13 ("window") or 2.9 ("is_causal"); it records its arguments."""

    def attend(q: Any, k: Any, v: Any, cu_q: Any, cu_k: Any, max_q: int, max_k: int) -> Any:
        assert cu_q.dtype == torch.int32 and cu_q is cu_k and max_q == max_k
        bounds = cu_q.tolist()
        assert max_q == max(b - a for a, b in itertools.pairwise(bounds))
        out = []
        for a, b in itertools.pairwise(bounds):
            qr, kr, vr = (x[a:b].transpose(0, 1) for x in (q, k, v))  # [heads, n, head dim]
            out.append(
                torch.nn.functional.scaled_dot_product_attention(
                    qr, kr, vr, is_causal=True, enable_gqa=True
                ).transpose(0, 1)
            )
        return torch.cat(out)

    def window(
        query: Any,
        key: Any,
        value: Any,
        cu_seq_q: Any,
        cu_seq_k: Any,
        max_q: int,
        max_k: int,
        *,
        return_aux: Any = None,
        scale: float | None = None,
        window_size: tuple[int, int] = (-1, -1),
        enable_gqa: bool = False,
    ) -> Any:
        calls.append({"window_size": window_size, "enable_gqa": enable_gqa, "scale": scale})
        assert window_size == (-1, 0)
        assert scale == pytest.approx(query.shape[-1] ** -0.5)
        return attend(query, key, value, cu_seq_q, cu_seq_k, max_q, max_k)

    def is_causal(*arguments: Any, is_causal: bool = False, return_aux: Any = None) -> Any:
        query, key = arguments[:2]
        calls.append({"is_causal": is_causal, "heads": (query.shape[1], key.shape[1])})
        assert is_causal and query.shape[1] == key.shape[1]  # no GQA: key heads repeated
        return attend(*arguments)

    return window if signature == "window" else is_causal


@pytest.mark.parametrize("signature", ["window", "is_causal"])
def test_packed_passes_run_the_varlen_kernel_with_the_layout(
    backend: Any, monkeypatch: Any, signature: str
) -> None:
    """The CUDA path's plumbing, on any device: the kernel gets the packed layout (cumulative
    lengths, the longest row, causal, grouped heads) and the result equals the padded path's.
    The kernel itself waits for a GPU; a stand-in computes what it computes."""
    client = backend.create_lora_training_client(TINY, rank=4, seed=3)
    randomised(client, 2)
    data = rl_data("importance_sampling", MIXED, seed=4)
    padded = run(client, data, "importance_sampling", packed=False)
    calls: list[dict[str, Any]] = []
    kernel = attention.varlen_call(varlen_stand_in(signature, calls), torch.float32)
    monkeypatch.setattr(attention, "varlen_kernel", lambda query: kernel)
    both = run(client, data, "importance_sampling", packed=True, checkpointing="on")
    assert_same(both, padded, tol=1e-5)
    layers = client.host.base.config.num_hidden_layers
    assert len(calls) == 2 * layers * len(plan_of(data, packed=True))  # forward and recompute
    if signature == "window":
        assert calls[0] == {"window_size": (-1, 0), "enable_gqa": True, "scale": calls[0]["scale"]}
    client.close()


def test_packed_bf16_equals_padded_within_autocast_noise(tmp_path: Any, monkeypatch: Any) -> None:
    """Under bf16 autocast, where a GPU runs torch's varlen kernel itself (a CPU attends per datum
    in fp32): the packed pass's loss and gradients equal the padded pass's within bf16 noise."""
    kernels: list[Any] = []
    find = attention.varlen_kernel

    def counted(query: Any) -> Any:
        kernels.append(find(query))
        return kernels[-1]

    monkeypatch.setattr(attention, "varlen_kernel", counted)
    with local_backend(tmp_path, "bfloat16") as engine:
        client = engine.create_lora_training_client(TINY, rank=4, seed=3)
        randomised(client, 2)
        data = rl_data("cross_entropy", MIXED, seed=4)
        (padded, want), (packed, got) = (
            run(client, data, "cross_entropy", packed=p) for p in (False, True)
        )
    assert packed.metrics["loss:sum"] == pytest.approx(padded.metrics["loss:sum"], rel=1e-2)
    for key, w in want.items():
        cosine = torch.nn.functional.cosine_similarity(got[key].flatten(), w.flatten(), dim=0)
        assert cosine > 0.99, key
    assert kernels  # every packed layer asked for the kernel
    has_kernel = engine_device().startswith("cuda") and torch.cuda.get_device_capability() >= (8, 0)
    has_kernel &= importlib.util.find_spec("torch.nn.attention.varlen") is not None
    assert all((k is not None) == has_kernel for k in kernels)


def test_optim_step_reports_the_padding_fraction(tmp_path: Any) -> None:
    fractions = {}
    for packing in ("off", "on"):
        settings = BackendSettings(
            log_dir=tmp_path / packing,
            seed=0,
            device=engine_device(),
            dtype="float32",
            extra={"packing": packing},
        )
        engine = create_local_backend(settings)
        try:
            client = engine.create_lora_training_client(TINY, rank=4, seed=0)
            client.forward_backward(rl_data("cross_entropy", MIXED), "cross_entropy").result()
            step = client.optim_step(types.AdamParams(learning_rate=1e-4)).result()
            fractions[packing] = step.metrics["train/padding_fraction"]
        finally:
            engine.close()
    assert fractions["on"] == 0.0 and fractions["off"] > 0.1


# -- planning what fits ----------------------------------------------------------------------------


def test_auto_turns_checkpointing_on_only_when_the_pass_would_not_fit() -> None:
    config = smollm2_config()
    plain = memory.activation_bytes(config, 4096, 4, checkpointed=False)
    saved = memory.activation_bytes(config, 4096, 4, checkpointed=True)
    assert saved * 4 < plain
    passes = [(0, 100), (3, 4096)]
    assert not memory.choose_checkpointing(config, "auto", passes, 4, budget=plain + 1)
    assert memory.choose_checkpointing(config, "auto", passes, 4, budget=plain - 1)
    assert memory.choose_checkpointing(config, "on", passes, 4, budget=plain + 1)


# What a training pass grew peak memory by (GiB), measured by bench/memory.py with one row of L
# tokens under LoRA rank 32 (docs/memory.md): a random 1.07B Llama in bf16 on an H200 (torch's peak
# allocated during the pass) and SmolLM2-135M in fp32 on this CPU (peak RSS).
SMOLLM2 = {"hidden_size": 576, "intermediate_size": 1536, "num_hidden_layers": 30}
LLAMA_1B = {"hidden_size": 2048, "num_hidden_layers": 16, "intermediate_size": 8192, "head_dim": 64}
MEASURED_GIB = [
    (LLAMA_1B, 32, 8, 2, 16384, False, 28.95),
    (LLAMA_1B, 32, 8, 2, 16384, True, 4.64),
    (LLAMA_1B, 32, 8, 2, 32768, False, 57.79),
    (LLAMA_1B, 32, 8, 2, 32768, True, 9.19),
    (SMOLLM2, 9, 3, 4, 4096, False, 5.49),
    (SMOLLM2, 9, 3, 4, 8192, False, 10.19),
]


def test_the_activation_estimate_bounds_what_was_measured() -> None:
    """At least what was measured, so auto never plans a pass that does not fit, and at most 12%
    over it, so it does not turn checkpointing on (or refuse) much too early."""
    from transformers import LlamaConfig

    for shape, heads, kv_heads, dtype_bytes, tokens, checkpointed, measured in MEASURED_GIB:
        config = LlamaConfig(
            **shape, num_attention_heads=heads, num_key_value_heads=kv_heads, vocab_size=49152
        )
        estimate = memory.activation_bytes(config, tokens, dtype_bytes, checkpointed) / 2**30
        assert measured <= estimate <= 1.12 * measured, (tokens, checkpointed, estimate, measured)
    # Checkpointed on the CPU, peak RSS also holds a fixed part (LoRA gradients, Adam's state, the
    # allocator's slack): the estimate bounds its growth, 1.09 GB at 4096 tokens and 1.49 at 8192.
    config = smollm2_config()
    grown = (
        memory.activation_bytes(config, 8192, 4, True)
        - memory.activation_bytes(config, 4096, 4, True)
    ) / 2**30
    assert 1.49 - 1.09 <= grown <= 1.4 * (1.49 - 1.09)


def test_a_pass_that_cannot_fit_is_refused_in_one_line_naming_the_way_out() -> None:
    config = smollm2_config()
    plain = memory.activation_bytes(config, 4096, 4, checkpointed=False)
    saved = memory.activation_bytes(config, 4096, 4, checkpointed=True)
    with pytest.raises(BackendError) as off:
        memory.choose_checkpointing(config, "off", [(3, 4096)], 4, budget=plain - 1)
    message = str(off.value)
    assert "\n" not in message and "datum 3" in message and "4096 tokens" in message
    assert "budget" in message and "--activation-checkpointing auto or on" in message
    with pytest.raises(BackendError, match="--max-length of at most ~") as on:
        memory.choose_checkpointing(config, "auto", [(3, 4096)], 4, budget=saved // 2)
    assert "\n" not in str(on.value) and "with activation checkpointing" in str(on.value)


def auto_pass_layer_calls(
    client: Any, monkeypatch: Any, free: int, refused: AbstractContextManager[Any] = nullcontext()
) -> int:
    """First-layer forwards of an RL pass under checkpointing "auto" with `free` bytes free;
    `refused` wraps the pass when it is expected to raise."""
    monkeypatch.setattr(memory, "free_memory", lambda device: free)
    with client.host.use(client.adapter) as model, counting_layer_calls(model) as calls, refused:
        run(client, rl_data("cross_entropy"), "cross_entropy", checkpointing="auto")
    return calls[0]


def test_the_engine_refuses_before_any_work(backend: Any, monkeypatch: Any) -> None:
    client = backend.create_lora_training_client(TINY, rank=4, seed=3)
    refused = pytest.raises(BackendError, match="datum 0: a pass of 27 tokens")
    assert auto_pass_layer_calls(client, monkeypatch, 1000, refused) == 0
    client.close()


def test_auto_checkpoints_a_pass_that_would_not_fit_otherwise(
    backend: Any, monkeypatch: Any
) -> None:
    client = backend.create_lora_training_client(TINY, rank=4, seed=3)
    config = client.host.base.config
    plain = memory.activation_bytes(config, 27, 4, checkpointed=False)  # the pass: 3 rows x 9
    saved = memory.activation_bytes(config, 27, 4, checkpointed=True)
    free = (plain + saved) / 2 / memory.USABLE_SHARE  # room for the checkpointed pass only
    assert auto_pass_layer_calls(client, monkeypatch, int(free)) == 2
    client.close()


def test_a_row_longer_than_the_micro_batch_budget_trains_or_is_refused_before_any_work(
    backend: Any, monkeypatch: Any
) -> None:
    client = backend.create_lora_training_client(TINY, rank=4, seed=3)
    randomised(client, 5)
    long_row = [(list(range(3, 43)), [7, 8, 9])]  # 42 tokens through the decoder, budget 16
    data = rl_data("cross_entropy", long_row, seed=4)
    with client.host.use(client.adapter) as model:
        alone = run_builtin_loss(model, data, "cross_entropy", None, True, PassSettings(16))
    assert_same((alone, grads_of(client)), run(client, data, "cross_entropy"))

    monkeypatch.setattr(memory, "free_memory", lambda device: 1000)
    with (
        client.host.use(client.adapter) as model,
        counting_layer_calls(model) as calls,
        pytest.raises(BackendError) as refused,
    ):
        run_builtin_loss(model, data, "cross_entropy", None, True, PassSettings(16, "auto"))
    message = str(refused.value)
    assert calls[0] == 0 and "\n" not in message
    assert "a pass of 42 tokens" in message and "the budget is" in message
    assert "--max-length of at most" in message
    client.close()


def test_a_client_reads_the_free_memory_once(backend: Any, monkeypatch: Any) -> None:
    reads = []
    monkeypatch.setattr(memory, "free_memory", lambda device: reads.append(device) or 2**40)
    client = backend.create_lora_training_client(TINY, rank=4, seed=3)
    for _ in range(3):
        client.forward_backward(rl_data("cross_entropy"), "cross_entropy").result()
    assert len(reads) == 1
    client.close()


def test_kitchen_serve_hands_the_levers_to_the_engine(tmp_path: Any) -> None:
    from kitchen.serve import ServeSettings
    from kitchen.serve.service import KitchenService

    serve = ServeSettings(
        checkpoint_dir=tmp_path,
        device=engine_device(),
        activation_checkpointing="on",
        packing=True,
        context_length=4096,
        rope_scaling="linear",
        spread_sampling=True,
    )
    service = KitchenService(serve)
    try:
        settings = service.backend.settings
        assert (settings.activation_checkpointing, settings.packing) == ("on", True)
        assert (settings.context_length, settings.rope_scaling) == (4096, "linear")
        assert settings.spread_sampling is True
    finally:
        service.backend.close()


def test_settings_take_the_levers() -> None:
    def engine(**extra: Any) -> EngineSettings:
        return EngineSettings.from_backend_settings(BackendSettings(device="cpu", extra=extra))

    assert engine().activation_checkpointing == "auto" and engine().packing is False
    assert engine(activation_checkpointing="on", packing="1").packing is True
    with pytest.raises(ConfigError, match="activation_checkpointing='sometimes'"):
        engine(activation_checkpointing="sometimes")


def smollm2_config() -> Any:
    from transformers import LlamaConfig

    return LlamaConfig(**SMOLLM2, num_attention_heads=9, num_key_value_heads=3, vocab_size=49152)
