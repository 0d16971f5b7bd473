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

from collections.abc import Callable, Iterator, Sequence
from typing import Any

from kitchen.adapters.local.batching import left_padded

# Positions per vocabulary chunk: the chunk's logits and fp32 log-softmax are all that exist at once
# (49k vocabulary: about 300 MB at 512 with the tensors backward keeps), never a whole [T, V].
LOGIT_CHUNK_TOKENS = 512

# (logprobs at the positions idx_N, idx_N) -> the loss those positions contribute (a scalar).
ChunkLoss = Callable[[Any, Any], Any]


class TargetLogprobs:
    """A micro-batch's decoder pass, run by the constructor (with grad if grad is enabled). Positions
    are flattened to N = B * T; logprobs come back as [N] (or [N, K] for K targets per position)."""

    def __init__(
        self,
        model: Any,
        tokens_BT: Any,
        targets: Any,
        shared: Sequence[tuple[list[int], int]] = (),
    ) -> None:
        """`shared`: (rows, prefix length) of the groups of rows that start with the same tokens
        (MicroBatch.shared); the decoder runs each group's prefix once."""
        import torch

        causal_lm = model.get_base_model() if hasattr(model, "get_base_model") else model
        decoder = causal_lm.get_decoder()
        head = causal_lm.get_output_embeddings()
        if decoder is None or head is None or _has_logit_transform(causal_lm.config):
            # The logits need more than the head: they are the "hidden states", the head is identity.
            self.hidden_NH = model(input_ids=tokens_BT, use_cache=False).logits.flatten(0, 1)
            self.head: Callable[[Any], Any] = lambda h: h
            shared = ()
        else:
            if shared:
                hidden = _decode(decoder, tokens_BT, shared)
            else:
                hidden = decoder(input_ids=tokens_BT, use_cache=False).last_hidden_state
            self.hidden_NH, self.head = hidden.flatten(0, 1), head
        self.shape = targets.shape  # [B, T] or [B, T, K]
        self.targets_N = targets.flatten(0, 1)
        self.grad_NH: Any = None  # set by the first chunk that backpropagates
        # Each position's stand-in for no-grad scoring: before a group's last shared token every
        # row has the group's first row's hidden state and target, so those are scored once.
        B, T = tokens_BT.shape[:2]
        self.canonical_N: Any = None
        if shared:
            canonical_BT = torch.arange(B * T, device=tokens_BT.device).view(B, T).clone()
            for rows, prefix in shared:
                canonical_BT[rows, : prefix - 1] = canonical_BT[rows[0], : prefix - 1]
            self.canonical_N = canonical_BT.flatten()

    def values(self, idx_N: Any = None) -> Any:
        """Logprobs at the positions `idx_N` (every position if None), without grad."""
        import torch

        idx_N = self._all() if idx_N is None else idx_N
        inverse = None
        if self.canonical_N is not None:
            idx_N, inverse = torch.unique(self.canonical_N[idx_N], return_inverse=True)
        with torch.no_grad():
            lp = self._cat([self._logprobs(self.hidden_NH[c], c) for c in _chunks(idx_N)])
        return lp if inverse is None else lp[inverse]

    def backprop(self, idx_N: Any, loss_of: ChunkLoss) -> Any:
        """Logprobs at `idx_N`; backpropagates `loss_of` of each chunk through the head now and
        keeps the hidden states' gradient for `finish`."""
        import torch

        out = []
        for c in _chunks(idx_N):
            h = self.hidden_NH[c].detach().requires_grad_()
            lp = self._logprobs(h, c)
            loss = loss_of(lp, c)
            if loss.requires_grad:
                loss.backward()
                if self.grad_NH is None:
                    self.grad_NH = torch.zeros_like(self.hidden_NH)
                self.grad_NH.index_copy_(0, c, h.grad)
            out.append(lp.detach())
        return self._cat(out)

    def backprop_gradient(self, g: Any) -> None:
        """Backpropagate sum(g * logprobs), g shaped as the targets: a loss linearised at these
        logprobs (g its gradient with respect to them). Positions where g is 0 are skipped."""
        g_N = g.flatten(0, 1)
        on = g_N.reshape(g_N.shape[0], -1).ne(0).any(1).nonzero().squeeze(1)
        self.backprop(on, lambda lp, c: (lp * g_N[c]).sum())
        self.finish()

    def finish(self) -> None:
        """The decoder's backward, once, with the gradients `backprop` collected."""
        if self.grad_NH is not None and self.hidden_NH.requires_grad:
            self.hidden_NH.backward(self.grad_NH)

    def train(self, active_N: Any, loss_of: ChunkLoss) -> Any:
        """Logprobs at every position: backprop at the `active_N` ones (bool [N]), values elsewhere;
        then finish."""
        import torch

        lp = torch.empty(self.targets_N.shape, device=self.targets_N.device)
        on, off = active_N.nonzero().squeeze(1), (~active_N).nonzero().squeeze(1)
        lp[on] = self.backprop(on, loss_of)
        lp[off] = self.values(off)
        self.finish()
        return lp

    def _logprobs(self, hidden: Any, idx: Any) -> Any:
        import torch
        import torch.nn.functional as F

        logits = self.head(hidden).float()
        targets = self.targets_N[idx]
        if targets.dim() == 1:
            # The fused op never materialises a separate log_softmax tensor.
            return -F.cross_entropy(logits, targets, reduction="none")
        return torch.log_softmax(logits, dim=-1).gather(-1, targets)

    def _all(self) -> Any:
        import torch

        return torch.arange(self.targets_N.shape[0], device=self.targets_N.device)

    def _cat(self, parts: list[Any]) -> Any:
        import torch

        if parts:
            return torch.cat(parts)
        return torch.empty((0, *self.targets_N.shape[1:]), device=self.targets_N.device)


def _decode(decoder: Any, tokens_BT: Any, shared: Sequence[tuple[list[int], int]]) -> Any:
    """Final hidden states [B, T, H] of rows that all belong to `shared` groups: every group's
    prefix runs once, left-padded to the longest (G x P), its keys and values are gathered for each
    of its rows, and the rows' own tokens (right-padded, B x R) attend to them. Row b's token t is
    then at P - prefix_b + t of [prefix pass | own pass], for every t."""
    import torch

    device = tokens_BT.device
    B = tokens_BT.shape[0]
    P = max(prefix for _, prefix in shared)
    group_B = torch.empty(B, dtype=torch.long, device=device)
    prefix_B = torch.empty(B, dtype=torch.long, device=device)
    for g, (rows, prefix) in enumerate(shared):
        group_B[rows], prefix_B[rows] = g, prefix
    prefix_GP, kwargs = left_padded(
        [tokens_BT[rows[0], :prefix] for rows, prefix in shared], device
    )
    mask_GP = kwargs.get("attention_mask")  # None: every prefix as long, nothing padded
    first = decoder(input_ids=prefix_GP, use_cache=True, **kwargs)
    cache = first.past_key_values
    cache.batch_select_indices(group_B)  # each row gets its group's keys and values
    R = tokens_BT.shape[1] - int(prefix_B.min())
    gather_BR = (prefix_B[:, None] + torch.arange(R, device=device)).clamp_max(
        tokens_BT.shape[1] - 1
    )
    own_BR = tokens_BT.gather(1, gather_BR)  # past a row's end: padding, never attended to
    kwargs = {"position_ids": prefix_B[:, None] + torch.arange(R, device=device)}
    if mask_GP is not None:  # rows must not attend to their prefix's left padding
        kwargs["attention_mask"] = torch.cat(
            [mask_GP[group_B], torch.ones(B, R, dtype=torch.long, device=device)], dim=1
        )
    own = decoder(input_ids=own_BR, past_key_values=cache, **kwargs).last_hidden_state
    both = torch.cat([first.last_hidden_state[group_B], own], dim=1)  # [B, P + R, H]
    T = tokens_BT.shape[1]
    index_BT = (P - prefix_B[:, None] + torch.arange(T, device=device)).clamp_max(P + R - 1)
    return both.gather(1, index_BT[..., None].expand(-1, -1, both.shape[-1]))


def _chunks(idx_N: Any) -> Iterator[Any]:
    for start in range(0, idx_N.shape[0], LOGIT_CHUNK_TOKENS):
        yield idx_N[start : start + LOGIT_CHUNK_TOKENS]


def _has_logit_transform(config: Any) -> bool:
    """Models whose forward rescales or soft-caps logits after the head; they take the plain path."""
    return bool(getattr(config, "final_logit_softcapping", None)) or bool(
        getattr(config, "logit_scale", None)
    )
