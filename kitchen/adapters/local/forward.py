"""Forward (and backward) passes of a request over its micro-batches.

Gradients accumulate in the trainable parameters across calls, as Tinker's do, until optim_step.
Built-in losses are sums over data, so micro-batches backpropagate one at a time and memory stays
bounded; a custom loss is linearised (see run_custom_loss), so it is bounded the same way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from tinker import types

from kitchen.adapters.local.batching import MicroBatch, plan_microbatches
from kitchen.adapters.local.host import model_limits
from kitchen.adapters.local.losses import (
    OPTIONAL_INPUTS,
    REQUIRED_INPUTS,
    TOKEN_METRICS,
    clip_thresholds,
    loss_fn_named,
)
from kitchen.engine.errors import BackendError
from kitchen.ports import CustomLossFn

OUTPUT_TYPE = "ArrayRecord"


# Positions (rows x sequence) per vocabulary chunk: the [chunk, V] fp32 log-softmax is all that
# exists at once (49k vocabulary: 100 MB at 512), never the whole [T, V].
LOGIT_CHUNK_TOKENS = 512


def target_logprobs(model: Any, tokens_BT: Any, targets: Any) -> Any:
    """log p(target) at every position: [B, T] for targets [B, T], [B, T, K] for targets [B, T, K].

    The decoder runs once; the unembedding and log-softmax run over chunks of the sequence, each
    recomputed in backward (checkpointed) instead of kept, so no [B, T, V] tensor outlives a chunk.
    """
    import torch

    causal_lm = model.get_base_model() if hasattr(model, "get_base_model") else model
    decoder = causal_lm.get_decoder()
    head = causal_lm.get_output_embeddings()
    if decoder is None or head is None or _has_logit_transform(causal_lm.config):
        return _chunk_logprobs(
            lambda h: h, model(input_ids=tokens_BT, use_cache=False).logits, targets
        )
    hidden_BTH = decoder(input_ids=tokens_BT, use_cache=False).last_hidden_state
    B, T = tokens_BT.shape
    step = max(1, LOGIT_CHUNK_TOKENS // B)
    chunks = []
    for start in range(0, T, step):
        h, t = hidden_BTH[:, start : start + step], targets[:, start : start + step]
        if torch.is_grad_enabled():
            from torch.utils.checkpoint import checkpoint

            chunks.append(checkpoint(_chunk_logprobs, head, h, t, use_reentrant=False))
        else:
            chunks.append(_chunk_logprobs(head, h, t))
    return torch.cat(chunks, dim=1)


def _has_logit_transform(config: Any) -> bool:
    """Models whose forward rescales or soft-caps logits after the head; they take the plain path."""
    return bool(getattr(config, "final_logit_softcapping", None)) or bool(
        getattr(config, "logit_scale", None)
    )


def _chunk_logprobs(head: Any, hidden: Any, targets: Any) -> Any:
    import torch
    import torch.nn.functional as F

    logits = head(hidden).float()
    if targets.dim() == 2:
        B, T, V = logits.shape
        # The fused op never materialises a separate log_softmax tensor.
        nll = F.cross_entropy(logits.reshape(B * T, V), targets.reshape(-1), reduction="none")
        return -nll.view(B, T)
    return torch.log_softmax(logits, dim=-1).gather(-1, targets)


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
    microbatch_tokens: int,
    backward: bool,
) -> types.ForwardBackwardOutput:
    """Compute `loss_fn` on `data` (and its gradients if `backward`); outputs logprobs per datum."""
    import torch

    fn = loss_fn_named(loss_fn)
    config = _config_floats(loss_fn_config)
    required = [k for k in REQUIRED_INPUTS[loss_fn] if k != "target_tokens"]
    optional = OPTIONAL_INPUTS.get(loss_fn, ())
    # Data without per-token thresholds get the batch-wide ones (loss_fn_config, else the default).
    low, high = clip_thresholds({}, config)
    fills = {"clip_low_threshold": float(low), "clip_high_threshold": float(high)}
    batches = plan_microbatches(
        data, required, optional, fills, microbatch_tokens, _device(model), *model_limits(model)
    )
    if loss_fn != "cross_entropy" and any(mb.targets.dim() != 2 for mb in batches):
        raise BackendError(
            f"loss_fn {loss_fn!r} takes one target token per position; got 2-D target_tokens"
        )
    outputs: list[np.ndarray | None] = [None] * len(data)
    loss_sum = 0.0
    diagnostics = TOKEN_METRICS.get(loss_fn, {})
    sums, trained = dict.fromkeys(diagnostics, 0.0), 0.0
    for mb in batches:
        with torch.enable_grad() if backward else torch.inference_mode():
            lp = target_logprobs(model, mb.tokens, mb.targets)
            mask = mb.inputs["_mask"]
            if lp.dim() == 3:
                mask = mask.unsqueeze(-1)
            loss = (fn(lp, mb.inputs, config) * mask).sum()
            if backward:
                loss.backward()
        loss_sum += float(loss.detach())
        if diagnostics:
            with torch.no_grad():
                on = mask * (mb.inputs["logprobs"] != 0)  # sampled tokens: prompt q is 0
                trained += float(on.sum())
                for key, metric in diagnostics.items():
                    sums[key] += float((metric(lp.detach(), mb.inputs, config) * on).sum())
        _collect(outputs, mb, lp)
    means = {f"{k}:mean": v / trained for k, v in sums.items()} if trained else {}
    return _output(outputs, {"loss:sum": loss_sum, **means})


def run_custom_loss(
    model: Any, data: Sequence[types.Datum], loss_fn: CustomLossFn, microbatch_tokens: int
) -> types.ForwardBackwardOutput:
    """Call `loss_fn(data, logprobs_per_datum)`, then backpropagate its gradient.

    Tinker's linearisation: logprobs are computed without a graph and handed to `loss_fn` as leaf
    tensors; the loss's gradient g w.r.t. them is then pushed through the model one micro-batch at
    a time (recomputing its forward) as the gradient of sum(g * logprobs). The parameter gradients
    equal those of backpropagating the loss through one big graph, but peak memory follows the
    micro-batch, not the batch.
    """
    import torch

    batches = plan_microbatches(
        data, (), (), {}, microbatch_tokens, _device(model), *model_limits(model)
    )
    outputs: list[np.ndarray | None] = [None] * len(data)
    with torch.no_grad():
        for mb in batches:
            _collect(outputs, mb, target_logprobs(model, mb.tokens, mb.targets))
    leaves = [
        torch.tensor(o, device=_device(model), requires_grad=True) for o in outputs if o is not None
    ]
    with torch.enable_grad():
        loss, metrics = loss_fn(list(data), leaves)
        if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
            raise BackendError(
                "custom loss function must return (scalar torch tensor, metrics dict)"
            )
        if loss.requires_grad:
            loss.backward()
        for mb in batches:
            grad = torch.zeros(mb.targets.shape, device=_device(model))
            for row, (i, n) in enumerate(zip(mb.indices, mb.lengths, strict=True)):
                leaf_grad = leaves[i].grad
                if leaf_grad is not None:  # None: the loss did not use this datum
                    grad[row, :n] = leaf_grad
            if grad.any():
                target_logprobs(model, mb.tokens, mb.targets).backward(grad)
    return _output(
        outputs, {**{k: float(v) for k, v in metrics.items()}, "loss:sum": float(loss.detach())}
    )


def _device(model: Any) -> Any:
    return next(model.parameters()).device


def _collect(outputs: list[np.ndarray | None], mb: MicroBatch, lp: Any) -> None:
    lp_cpu = lp.detach().float().cpu().numpy()
    for row, (i, n) in enumerate(zip(mb.indices, mb.lengths, strict=True)):
        outputs[i] = lp_cpu[row, :n]


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
