"""Forward (and backward) passes of a request over its micro-batches.

Gradients accumulate in the trainable parameters across calls, as Tinker's do, until optim_step.
Built-in losses are sums over data, so micro-batches backpropagate one at a time and memory stays
bounded; a custom loss is linearised (see run_custom_loss), so it is bounded the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import nullcontext
from typing import TYPE_CHECKING, Any

import numpy as np
from tinker import types

from kitchen.adapters.local.model.host import model_limits
from kitchen.adapters.local.model.images import Expanded, vision_of
from kitchen.adapters.local.train.batching import (
    TARGETS_ONLY,
    BatchTarget,
    LossInputs,
    MicroBatch,
    plan_microbatches,
)
from kitchen.adapters.local.train.logprobs import TargetLogprobs
from kitchen.adapters.local.train.loss_fns import loss_fn_named
from kitchen.adapters.local.train.memory import activation_checkpointing, plan_checkpointing
from kitchen.engine.errors import BackendError
from kitchen.ports import CustomLossFn
from train_core.losses import (
    GRADIENT_GATE,
    OPTIONAL_INPUTS,
    REQUIRED_INPUTS,
    TOKEN_METRICS,
    LossFn,
    clip_thresholds,
)

if TYPE_CHECKING:
    from kitchen.adapters.local.train.deal import Deal
    from kitchen.adapters.local.train.pass_settings import PassSettings

OUTPUT_TYPE = "ArrayRecord"


def _config_floats(loss_fn_config: Mapping[str, Any] | None) -> dict[str, float]:
    out: dict[str, float] = {}
    for key, value in (loss_fn_config or {}).items():
        try:
            out[key] = float(value)
        except (TypeError, ValueError) as e:
            raise BackendError(f"loss_fn_config[{key!r}] = {value!r} is not a number") from e
    return out


def run_builtin_loss(
    model: Any,
    data: Sequence[types.Datum],
    loss_fn: str,
    loss_fn_config: Mapping[str, Any] | None,
    backward: bool,
    settings: PassSettings,
) -> types.ForwardBackwardOutput:
    """Compute `loss_fn` on `data` (and its gradients if `backward`, with the activation
    checkpointing, packing and padding tally of `settings`); outputs logprobs per datum.
    With `settings.share`, each micro-batch's gradient is summed apart and added in plan order
    (Deal); in a --nproc N run every rank plans the same micro-batches and runs its deal of them,
    and gradients reach every rank and results rank 0 (the other ranks return nothing)."""
    import torch

    loss_fn_named(loss_fn)  # an unknown name is refused before the data is read
    share, tally = settings.share, settings.tally
    config = _config_floats(loss_fn_config)
    required = [k for k in REQUIRED_INPUTS[loss_fn] if k != "target_tokens"]
    optional = OPTIONAL_INPUTS.get(loss_fn, ())
    # Data without per-token thresholds get the batch-wide ones (loss_fn_config, else the default).
    low, high = clip_thresholds({}, config)
    fills = {"clip_low_threshold": float(low), "clip_high_threshold": float(high)}
    inputs = LossInputs(required, optional, fills)
    batches = plan_microbatches(
        data, inputs, settings.microbatch_tokens, _target(model), packed=settings.packed
    )
    if loss_fn != "cross_entropy" and any(mb.targets.dim() != 2 for mb in batches):
        raise BackendError(
            f"loss_fn {loss_fn!r} takes one target token per position; got 2-D target_tokens"
        )
    diagnostics = TOKEN_METRICS.get(loss_fn, {})
    recompute = backward and plan_checkpointing(
        model, batches, settings.checkpointing, settings.budget
    )
    if backward and tally is not None:
        tally.add(batches)
    with activation_checkpointing(model, recompute):
        totals, lps, indices = _run_batches(model, batches, loss_fn, config, backward, share)
    per_batch = torch.stack(totals).tolist() if totals else []
    if share is not None and share.distributed:
        per_batch, lps = _gather_results(share, len(batches), indices, per_batch, lps)
        if not share.leader:
            return _output([], {})
    outputs = _collect(len(data), batches, lps)
    trained = 0.0  # sampled tokens trained on, the denominator of the diagnostics' means
    if diagnostics:
        for mb in batches:
            host = mb.host_inputs
            trained += float((host["_mask"] * (host["logprobs"] != 0)).sum())
    loss_sum = sum(row[0] for row in per_batch)  # summed in Python, in micro-batch order
    sums = {k: sum(row[1 + j] for row in per_batch) for j, k in enumerate(diagnostics)}
    means = {f"{k}:mean": v / trained for k, v in sums.items()} if trained else {}
    return _output(outputs, {"loss:sum": loss_sum, **means})


def _run_batches(
    model: Any,
    batches: list[MicroBatch],
    loss_fn: str,
    config: dict[str, float],
    backward: bool,
    share: Deal | None = None,
) -> tuple[list[Any], list[Any], list[int]]:
    """Per micro-batch [loss, *diagnostic sums] (TOKEN_METRICS), logprobs and index (this rank's
    deal with `share`). The sums stay on the device and are read once at the end, so no
    micro-batch waits for the one before it to finish on an accelerator."""
    import torch

    fn = loss_fn_named(loss_fn)
    diagnostics = TOKEN_METRICS.get(loss_fn, {})

    totals, lps, kept_indices = [], [], []
    passes = (
        [(i, True) for i in range(len(batches))]
        if share is None
        else share.passes(_pass_kinds(batches))
    )
    for i, kept in passes:
        mb = batches[i]
        if backward and not kept and share is not None and share.sharded:
            _zero_pass(model, mb)
            continue
        mask = mb.inputs["_mask"]
        with (
            torch.enable_grad() if backward else torch.inference_mode(),
            share.own_grads(kept) if share is not None and backward else nullcontext(),
        ):
            head = TargetLogprobs(model, mb, lockstep=_lockstep(share))
            lp = _train(head, loss_fn, fn, mb, config) if backward else head.values()
            lp = lp.view(mb.targets.shape)
            if lp.dim() == 3:
                mask = mask.unsqueeze(-1)
            loss = (fn(lp, mb.inputs, config) * mask).sum()
        if not kept:  # a filler pass: it only kept the ranks in step
            continue
        parts = [loss.detach()]
        if diagnostics:
            with torch.no_grad():
                on = mask * (mb.inputs["logprobs"] != 0)  # sampled tokens: prompt q is 0
                parts += [(m(lp, mb.inputs, config) * on).sum() for m in diagnostics.values()]
        totals.append(torch.stack(parts))
        lps.append(lp)
        kept_indices.append(i)
    return totals, lps, kept_indices


def _zero_pass(model: Any, mb: MicroBatch) -> None:
    """A filler pass of a model whose gradients FSDP sums over the ranks (Deal.sharded): its
    decoder runs forward and backward, so the ranks' all-gathers and reduce-scatters stay in step,
    with a zero gradient, which adds nothing to the other ranks' passes in the sum."""
    import torch

    with torch.enable_grad():
        TargetLogprobs(model, mb, lockstep=True).finish()


def _lockstep(share: Deal | None) -> bool:
    """Whether the passes run in step with other ranks (TargetLogprobs' lockstep)."""
    return share is not None and share.distributed


def _pass_kinds(batches: list[MicroBatch]) -> list[bool]:
    """What makes two micro-batches' passes differ in their decoder calls: a shared-prefix one calls
    the decoder twice (logprobs.py), any other once."""
    return [bool(mb.shared) for mb in batches]


def _gather_results(
    share: Deal, count: int, indices: list[int], per_batch: list[Any], lps: list[Any]
) -> tuple[list[Any], list[Any]]:
    """Every rank's per-micro-batch sums and logprobs (of micro-batches `indices` on this rank) on
    rank 0, in plan order (empty elsewhere)."""
    import torch

    mine = [lp.detach().float().cpu().numpy() for lp in lps]
    parts = share.gather((indices, per_batch, mine))
    if parts is None:
        return [], []
    rows: list[Any] = [None] * count
    out: list[Any] = [None] * count
    for indices, sums, arrays in parts:
        for i, row, array in zip(indices, sums, arrays, strict=True):
            rows[i], out[i] = row, torch.from_numpy(array)
    return rows, out


def run_custom_loss(
    model: Any,
    data: Sequence[types.Datum],
    loss_fn: CustomLossFn,
    settings: PassSettings,
    backprop: Callable[[list[Any]], None] | None = None,
    score: Callable[[], list[np.ndarray | None] | None] | None = None,
) -> types.ForwardBackwardOutput:
    """Call `loss_fn(data, logprobs_per_datum)`, then backpropagate its gradient (`settings` as
    run_builtin_loss's). In a --nproc N run, `score` gives the logprobs per datum (every rank
    scores its deal, score_data) and `backprop` pushes the gradient (per datum, None where the
    loss did not use it) through the model (every rank, backprop_gradients).

    Tinker's linearisation: logprobs are computed without a graph and handed to `loss_fn` as leaf
    tensors; the loss's gradient g w.r.t. them is then pushed through the model one micro-batch at
    a time (recomputing its forward) as the gradient of sum(g * logprobs). The parameter gradients
    equal those of backpropagating the loss through one big graph, but peak memory follows the
    micro-batch, not the batch.

    The leaves are CPU float32 tensors whatever the engine's device, as the Tinker SDK hands them
    (a loss written for it mixes them with `TensorData.to_torch()`, which is on the CPU); the loss
    is a few small ops per datum, which a CPU runs without kernel launches or device syncs.
    """
    import torch

    batches = _plan_scored(model, data, settings)
    recompute = plan_checkpointing(model, batches, settings.checkpointing, settings.budget)
    if settings.tally is not None:
        settings.tally.add(batches)
    outputs = _score(model, batches) if score is None else score()
    assert outputs is not None  # on rank 0
    leaves = [torch.tensor(o, device="cpu", requires_grad=True) for o in outputs if o is not None]
    with torch.enable_grad():
        loss, metrics = loss_fn(list(data), leaves)
        if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
            raise BackendError(
                "custom loss function must return (scalar torch tensor, metrics dict)"
            )
        if loss.requires_grad:
            loss.backward()
        if backprop is not None:
            backprop([leaf.grad for leaf in leaves])
        else:
            with activation_checkpointing(model, recompute):
                _backprop_leaves(model, batches, [leaf.grad for leaf in leaves], settings.share)
    return _output(
        outputs, {**{k: float(v) for k, v in metrics.items()}, "loss:sum": float(loss.detach())}
    )


def _backprop_leaves(
    model: Any, batches: list[MicroBatch], grads: list[Any], share: Deal | None = None
) -> None:
    """Push the gradients the custom loss left on its leaves (`grads`, per datum) through the
    model, a micro-batch at a time (its forward run again, with grad); with `share`, this rank's
    deal of them."""
    import torch

    work = []  # (micro-batch index, its gradient, the positions where it is nonzero)
    for index, mb in enumerate(batches):
        grad = torch.zeros(mb.targets.shape, device="cpu")
        for i, row, start, n in mb.spans():
            leaf_grad = grads[i]
            if leaf_grad is not None:  # None: the loss did not use this datum
                grad[row, start : start + n] = torch.as_tensor(leaf_grad, device="cpu")
        on_N = _positions_with_gradient(grad.numpy())
        if on_N.size:  # decided on the host: no device sync
            work.append((index, grad, on_N))
    passes = (
        [(w, True) for w in range(len(work))]
        if share is None
        else share.passes(_pass_kinds([batches[index] for index, _, _ in work]))
    )
    for w, kept in passes:
        index, grad, on_N = work[w]
        if not kept and share is not None and share.sharded:
            _zero_pass(model, batches[index])
            continue
        with share.own_grads(kept) if share is not None else nullcontext():
            head = TargetLogprobs(model, batches[index], lockstep=_lockstep(share))
            head.backprop_gradient(grad.to(_device(model)), on_N)


def backprop_gradients(
    model: Any,
    data: Sequence[types.Datum],
    grads: list[Any],
    settings: PassSettings,
) -> None:
    """Every rank of a --nproc N run: its deal (`settings.share`) of a custom loss's backward, given
    the loss's gradient per datum (what run_custom_loss hands its `backprop`), on the same
    micro-batches."""
    import torch

    assert settings.share is not None
    batches = _plan_scored(model, data, settings)
    recompute = plan_checkpointing(model, batches, settings.checkpointing, settings.budget)
    with torch.enable_grad(), activation_checkpointing(model, recompute):
        _backprop_leaves(model, batches, grads, settings.share)


def score_data(
    model: Any, data: Sequence[types.Datum], settings: PassSettings
) -> list[np.ndarray | None] | None:
    """Every rank of a --nproc N run: the logprobs of each datum's targets (run_custom_loss's
    micro-batches), this rank's deal of the passes (`settings.share`), gathered on rank 0 (None
    elsewhere)."""
    assert settings.share is not None
    return _score(model, _plan_scored(model, data, settings), settings.share)


def _plan_scored(
    model: Any, data: Sequence[types.Datum], settings: PassSettings
) -> list[MicroBatch]:
    """The micro-batches of data scored with target tokens only (a custom loss's)."""
    return plan_microbatches(
        data, TARGETS_ONLY, settings.microbatch_tokens, _target(model), packed=settings.packed
    )


def _target(model: Any) -> BatchTarget:
    """`model` as its micro-batches are planned for: its device, the ids and length it takes,
    its image side."""
    return BatchTarget(_device(model), *model_limits(model), vision=vision_of(model))


def score_sequences(
    model: Any,
    sequences: Sequence[Sequence[int] | Expanded],
    microbatch_tokens: int,
    share: Deal | None = None,
) -> list[np.ndarray] | None:
    """log p(token t | the tokens before it) for t >= 1 of each sequence (float32 [len - 1]), in
    shared micro-batches: many sequences per decoder pass, and those that start alike (a DPO
    pair's prompt, an RL group's) through their common prefix once. The sequences are valid ids
    for the model (the caller checked); an `Expanded` one carries images (images.py). With a
    --nproc N `share`, every rank runs its deal of the passes and rank 0 gets the result (the
    others None)."""
    expanded_N = [s if isinstance(s, Expanded) else Expanded(list(s), []) for s in sequences]
    scored = [i for i, s in enumerate(expanded_N) if len(s.tokens) > 1]
    out = [np.zeros(0, dtype=np.float32) for _ in sequences]
    if not scored:
        return out
    data = [
        types.Datum(
            model_input=types.ModelInput.from_ints(expanded_N[i].tokens[:-1]),
            loss_fn_inputs={
                "target_tokens": types.TensorData.from_numpy(
                    np.asarray(expanded_N[i].tokens[1:], dtype=np.int64)
                )
            },
        )
        for i in scored
    ]
    # The last token is never an image's (a prompt ends in text), so dropping it keeps the images.
    inputs = [Expanded(expanded_N[i].tokens[:-1], expanded_N[i].images) for i in scored]
    vision = vision_of(model) if any(e.images for e in inputs) else None
    target = BatchTarget(_device(model), vision=vision)
    batches = plan_microbatches(data, TARGETS_ONLY, microbatch_tokens, target, expanded=inputs)
    lps = _score(model, batches, share)
    if lps is None:
        return None
    for i, lp in zip(scored, lps, strict=True):
        assert lp is not None
        out[i] = lp
    return out


def _score(
    model: Any, batches: list[MicroBatch], share: Deal | None = None
) -> list[np.ndarray | None] | None:
    """Every datum's logprobs of its targets, without grad; with a --nproc N `share`, this rank's
    deal of the passes, gathered on rank 0 (None elsewhere)."""
    import torch

    count = sum(len(mb.indices) for mb in batches)
    passes = (
        [(i, True) for i in range(len(batches))]
        if share is None or not share.distributed
        else share.passes(_pass_kinds(batches))
    )
    indices, lps = [], []
    with torch.no_grad():
        for i, kept in passes:
            lp = TargetLogprobs(model, batches[i], lockstep=_lockstep(share))
            lp = lp.values().view(batches[i].targets.shape)
            if kept:  # else a filler pass: it only kept the ranks in step
                indices.append(i)
                lps.append(lp)
    if share is not None and share.distributed:
        _, lps = _gather_results(share, len(batches), indices, [None] * len(indices), lps)
        if not share.leader:
            return None
    return _collect(count, batches, lps)


def _train(
    head: TargetLogprobs, loss_fn: str, fn: LossFn, mb: MicroBatch, config: dict[str, float]
) -> Any:
    """Backpropagate the micro-batch's summed loss; its logprobs at every position, [N] or [N, K]."""
    inputs, host = mb.inputs, mb.host_inputs
    gate = GRADIENT_GATE.get(loss_fn)
    if gate is None:
        # The loss couples a row's positions (gspo's sequence ratio): linearise it at the values.
        leaf = head.values().view(head.shape).requires_grad_()
        (fn(leaf, inputs, config) * inputs["_mask"]).sum().backward()
        # Which positions have a gradient depends on the loss's values: read from the device.
        head.backprop_gradient(leaf.grad, _positions_with_gradient(leaf.grad.cpu().numpy()))
        return leaf.detach()
    flat = {k: v.flatten(0, 1) for k, v in inputs.items()}

    def loss_at(lp: Any, idx: Any) -> Any:
        at = {k: v[idx] for k, v in flat.items()}
        weight = at["_mask"].view(-1, *[1] * (lp.dim() - 1))
        return (fn(lp, at, config) * weight).sum()

    active_N = host["_mask"].reshape(-1) != 0
    if gate != "_mask":
        active_N &= (host[gate].reshape(active_N.shape[0], -1) != 0).any(1)
    return head.train(active_N, loss_at)


def _positions_with_gradient(g: np.ndarray) -> np.ndarray:
    """Flat indices of the positions (the first two axes of `g`) with a nonzero gradient."""
    return np.flatnonzero(g.reshape(g.shape[0] * g.shape[1], -1).any(1))


def _device(model: Any) -> Any:
    return next(model.parameters()).device


def _collect(count: int, batches: list[MicroBatch], lps: list[Any]) -> list[np.ndarray | None]:
    """Each datum's logprobs (rows of the micro-batches' `lps`), copied from the device at once."""
    import torch

    flat = torch.cat([lp.detach().float().reshape(-1) for lp in lps]).cpu().numpy()
    outputs: list[np.ndarray | None] = [None] * count
    start = 0
    for mb, lp in zip(batches, lps, strict=True):
        block = flat[start : start + lp.numel()].reshape(mb.targets.shape)
        start += lp.numel()
        for i, row, first, n in mb.spans():
            outputs[i] = block[row, first : first + n]
    return outputs


def _output(
    outputs: list[np.ndarray | None], metrics: dict[str, float]
) -> types.ForwardBackwardOutput:
    return types.ForwardBackwardOutput(
        loss_fn_output_type=OUTPUT_TYPE,
        loss_fn_outputs=[
            {"logprobs": types.TensorData.from_numpy(np.ascontiguousarray(o))}
            for o in outputs
            if o is not None
        ],
        metrics=metrics,
    )
