"""log p(target) from one decoder pass, the unembedding and log-softmax run a chunk of positions at a
time, so no [B, T, V] tensor ever exists.

With gradients, each chunk's head runs forward and backward at once (its logits are freed before
the next chunk) and only the gradient of the final hidden states is kept; the decoder then runs its
backward once. So the head costs one forward and one backward, never a recompute, and positions the
loss does not train (prompt tokens: weight or advantage 0) cost only a head forward, without grad.

Rows that start with the same tokens (an RL group's samples of one prompt, a DPO pair's prompt) run
that shared prefix through the decoder once: its keys and values are repeated for every row, the
rows' own tokens attend to them, and backward sums the rows' gradients into the one prefix pass.
Several groups run their prefixes in one left-padded pass and all their rows in one more.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import nullcontext
from typing import Any

import numpy as np

from kitchen.adapters.local.model.attention import packed_pass
from kitchen.adapters.local.model.vocab import head_gathers
from kitchen.adapters.local.train.batching import MicroBatch, left_padded_host, to_device

# Positions per vocabulary chunk: the chunk's logits and fp32 log-softmax are all that exist at once
# (49k vocabulary: about 300 MB at 512 with the tensors backward keeps), never a whole [T, V].
LOGIT_CHUNK_TOKENS = 512

# (logprobs at the positions idx_N, idx_N) -> the loss those positions contribute (a scalar).
ChunkLoss = Callable[[Any, Any], Any]


class TargetLogprobs:
    """A micro-batch's decoder pass, run by the constructor (with grad if grad is enabled). Positions
    are flattened to N = B * T; logprobs come back as [N] (or [N, K] for K targets per position).
    Positions are chosen by host index arrays (the micro-batch's host inputs decide them), so
    choosing them never waits for the device."""

    def __init__(self, model: Any, mb: MicroBatch, lockstep: bool = False) -> None:
        """The decoder runs each group of `mb.shared` (rows that start with the same tokens) through
        its prefix once. `lockstep`: every rank of a --nproc N run runs this pass in step, so its
        decoder's backward runs even where no position has a gradient (each rank's FSDP hooks
        then gather the same layers; the gradient it adds is zero), and each call of `values`
        and `backprop` runs the head on as many chunks of positions as the rank with the most,
        where the head gathers its vocabulary blocks from the ranks (sharded_base.py)."""
        self.lockstep = lockstep
        causal_lm = model.get_base_model() if hasattr(model, "get_base_model") else model
        decoder = causal_lm.get_decoder()
        head = causal_lm.get_output_embeddings()
        shared = mb.shared
        # A packed micro-batch's kwargs confine attention to each datum (attention.py).
        kwargs = mb.decoder_kwargs()
        self.head: Callable[[Any], Any]
        if mb.images is not None:
            # Images: the whole vision-language model (vision tower, features scattered into the
            # image tokens, M-RoPE), whose final hidden states the head then reads chunk by chunk.
            hidden = causal_lm.model(input_ids=mb.tokens, use_cache=False, **mb.images)
            self.hidden_NH, self.head = hidden.last_hidden_state.flatten(0, 1), head
        elif decoder is None or head is None or _has_logit_transform(causal_lm.config):
            # The logits need more than the head: they are the "hidden states", the head is identity.
            with packed_pass(causal_lm) if kwargs else nullcontext():
                logits = model(input_ids=mb.tokens, use_cache=False, **kwargs).logits
            self.hidden_NH = logits.flatten(0, 1)
            self.head = lambda h: h
            shared = []
        else:
            if shared:
                hidden = _decode(decoder, mb)
            else:
                with packed_pass(decoder) if kwargs else nullcontext():
                    hidden = decoder(input_ids=mb.tokens, use_cache=False, **kwargs)
                hidden = hidden.last_hidden_state
            self.hidden_NH, self.head = hidden.flatten(0, 1), head
        # The head's calls, not only the decoder's, are then collectives.
        self.head_in_step = lockstep and self.head is head and head_gathers(head)
        self.shape = mb.targets.shape  # [B, T] or [B, T, K]
        self.targets_N = mb.targets.flatten(0, 1)
        self.device = mb.targets.device
        self.grad_NH: Any = None  # set by the first chunk that backpropagates
        # Each position's stand-in for no-grad scoring: before a group's last shared token every
        # row has the group's first row's hidden state and target, so those are scored once.
        B, T = mb.host_tokens.shape
        self.canonical_N: np.ndarray | None = None
        if shared:
            canonical_BT = np.arange(B * T).reshape(B, T)
            for rows, prefix in shared:
                canonical_BT[rows, : prefix - 1] = canonical_BT[rows[0], : prefix - 1]
            self.canonical_N = canonical_BT.reshape(-1)

    @property
    def positions(self) -> int:
        return int(self.targets_N.shape[0])

    def values(self, idx_N: np.ndarray | None = None) -> Any:
        """Logprobs at the positions `idx_N` (host indices; every position if None), without grad."""
        import torch

        idx_N = np.arange(self.positions) if idx_N is None else idx_N
        if self.canonical_N is not None:
            idx_N, inverse = np.unique(self.canonical_N[idx_N], return_inverse=True)
            idx, inverse_dev = to_device(self.device, idx_N, inverse.reshape(-1))
        else:
            (idx,), inverse_dev = to_device(self.device, idx_N), None
        with torch.no_grad():
            lp = self._cat([self._logprobs(self.hidden_NH[c], c) for c in self._chunks(idx)])
        return lp if inverse_dev is None else lp[inverse_dev]

    def backprop(self, idx: Any, loss_of: ChunkLoss) -> Any:
        """Logprobs at the positions `idx` (a device index tensor); backpropagates `loss_of` of each
        chunk through the head now and keeps the hidden states' gradient for `finish`."""
        import torch

        out = []
        for c in self._chunks(idx):
            h = self.hidden_NH[c].detach().requires_grad_()
            lp = self._logprobs(h, c)
            leaf = lp.detach().requires_grad_()
            loss = loss_of(leaf, c)
            out.append(leaf.detach())
            if loss.requires_grad:
                (grad,) = torch.autograd.grad(loss, leaf)
            elif self.head_in_step:  # its backward gathers the blocks on every rank
                grad = torch.zeros_like(lp)
            else:
                continue
            lp.backward(grad)
            if self.grad_NH is None:
                self.grad_NH = torch.zeros_like(self.hidden_NH)
            self.grad_NH.index_copy_(0, c, h.grad)
        return self._cat(out)

    def backprop_gradient(self, g: Any, on_N: np.ndarray) -> None:
        """Backpropagate sum(g * logprobs), g shaped as the targets: a loss linearised at these
        logprobs (g its gradient with respect to them), nonzero only at the host indices `on_N`."""
        g_N = g.flatten(0, 1)
        (on,) = to_device(self.device, on_N)
        self.backprop(on, lambda lp, c: (lp * g_N[c]).sum())
        self.finish()

    def finish(self) -> None:
        """The decoder's backward, once, with the gradients `backprop` collected."""
        import torch

        if self.lockstep and self.grad_NH is None:
            self.grad_NH = torch.zeros_like(self.hidden_NH)
        if self.grad_NH is not None and self.hidden_NH.requires_grad:
            self.hidden_NH.backward(self.grad_NH)

    def train(self, active_N: np.ndarray, loss_of: ChunkLoss) -> Any:
        """Logprobs at every position: backprop at the `active_N` ones (a host bool array), values
        elsewhere; then finish."""
        import torch

        on_N, off_N = np.flatnonzero(active_N), np.flatnonzero(~active_N)
        on, off = to_device(self.device, on_N, off_N)
        lp = torch.empty(self.targets_N.shape, device=self.device)
        lp[on] = self.backprop(on, loss_of)
        lp[off] = self.values(off_N)
        self.finish()
        return lp

    def _chunks(self, idx_N: Any) -> Iterator[Any]:
        """`idx_N` a chunk of positions at a time; with the head in step, as many chunks as the
        rank with the most has (empty ones past the end): each chunk runs the head, whose blocks
        every rank gathers (sharded_base.py)."""
        import torch

        count = -(-idx_N.shape[0] // LOGIT_CHUNK_TOKENS)
        if self.head_in_step:
            import torch.distributed as dist

            most = torch.tensor([count], device=idx_N.device)
            dist.all_reduce(most, op=dist.ReduceOp.MAX)
            count = int(most.item())
        for start in range(0, count * LOGIT_CHUNK_TOKENS, LOGIT_CHUNK_TOKENS):
            yield idx_N[start : start + LOGIT_CHUNK_TOKENS]

    def _logprobs(self, hidden: Any, idx: Any) -> Any:
        import torch
        import torch.nn.functional as F

        logits = self.head(hidden).float()
        targets = self.targets_N[idx]
        if targets.dim() == 1:
            # The fused op never materialises a separate log_softmax tensor.
            return -F.cross_entropy(logits, targets, reduction="none")
        return torch.log_softmax(logits, dim=-1).gather(-1, targets)

    def _cat(self, parts: list[Any]) -> Any:
        import torch

        if parts:
            return torch.cat(parts)
        return torch.empty((0, *self.targets_N.shape[1:]), device=self.device)


def _decode(decoder: Any, mb: MicroBatch) -> Any:
    """Final hidden states [B, T, H] of rows that all belong to `mb.shared` groups: every group's
    prefix runs once, left-padded to the longest (G x P), its keys and values are gathered for each
    of its rows, and the rows' own tokens (right-padded, B x R) attend to them. Row b's token t is
    then at P - prefix_b + t of [prefix pass | own pass], for every t. The layout is computed on the
    host and copied over once."""
    import torch

    tokens_BT = mb.host_tokens
    B, T = tokens_BT.shape
    group_B = np.zeros(B, dtype=np.int64)
    prefix_B = np.zeros(B, dtype=np.int64)
    for g, (rows, prefix) in enumerate(mb.shared):
        group_B[rows], prefix_B[rows] = g, prefix
    prefix_GP, mask_GP = left_padded_host(
        [tokens_BT[rows[0], :prefix] for rows, prefix in mb.shared]
    )
    P, R = prefix_GP.shape[1], T - int(prefix_B.min())
    position_BR = prefix_B[:, None] + np.arange(R)
    # Past a row's end its own tokens are padding, never attended to.
    own_BR = np.take_along_axis(tokens_BT, np.minimum(position_BR, T - 1), axis=1)
    index_BT = np.minimum(P - prefix_B[:, None] + np.arange(T), P + R - 1)
    host = [group_B, prefix_GP, position_BR, own_BR, index_BT]
    if mask_GP is not None:  # rows must not attend to their prefix's left padding
        position_GP = np.maximum(mask_GP.cumsum(-1) - 1, 0)
        mask_BPR = np.concatenate([mask_GP[group_B], np.ones((B, R), dtype=np.int64)], axis=1)
        host += [mask_GP, position_GP, mask_BPR]
    group, prefix_ids, position, own, index, *masks = to_device(mb.tokens.device, *host)
    first_kwargs = {} if not masks else {"attention_mask": masks[0], "position_ids": masks[1]}
    first = decoder(input_ids=prefix_ids, use_cache=True, **first_kwargs)
    cache = first.cache
    cache.batch_select_indices(group)  # each row gets its group's keys and values
    own_kwargs = {"position_ids": position} | ({"attention_mask": masks[2]} if masks else {})
    hidden = decoder(input_ids=own, cache=cache, **own_kwargs).last_hidden_state
    both = torch.cat([first.last_hidden_state[group], hidden], dim=1)  # [B, P + R, H]
    return both.gather(1, index[..., None].expand(-1, -1, both.shape[-1]))


def _has_logit_transform(config: Any) -> bool:
    """Models whose forward rescales or soft-caps logits after the head; they take the plain path."""
    return bool(getattr(config, "final_logit_softcapping", None)) or bool(
        getattr(config, "logit_scale", None)
    )
