"""Datums -> micro-batches: token ids [B, T], targets [B, T] or [B, T, K], loss inputs [B, T].

Padded: rows right-padded (a causal model needs no mask then), sorted by length, up to
`max_tokens` padded tokens per micro-batch; a padded position weighs 0 (`_mask`). Packed
(`packed`, padding-free): a micro-batch's rows end to end in one row with restarting positions, up
to `max_tokens` real tokens. Rows that start alike (an RL group's samples of one prompt) run their
shared prefix once when that saves tokens. A request with images is neither packed nor run through
shared prefixes. docs/adapters.md (the local engine's measurements) says why each."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from tinker import types

from kitchen.adapters.local.model.attention import packed_kwargs
from kitchen.adapters.local.model.images import Expanded, Vision, mrope_positions, text_only
from kitchen.engine.errors import BackendError

# Rows sharing at least this many leading tokens may run them once; below it the saving is noise.
MIN_SHARED_PREFIX = 16
# In a packed plan, the tokens a shared-prefix group must save to earn its passes: packed, its rows
# would join a packed row at no padding and no pass of their own, while the group runs two decoder
# calls (prefix, then rows) whose fixed cost is 20-35 tokens' worth each on a CPU (SmolLM2-135M,
# forward and backward: 0.15-0.28 s a call against 8 ms a token, 2026-11-27). GPUs run more tokens
# for a call's fixed cost, so there this keeps groups that could have been packed, as before.
PACKED_MIN_SAVING = 64


@dataclass
class MicroBatch:
    """A packed slice of one request: rows are data `indices` (positions in the request)."""

    indices: list[int]
    lengths: list[int]
    tokens: Any  # LongTensor [B, T]
    targets: Any  # LongTensor [B, T] or [B, T, K]
    inputs: dict[str, Any]  # name -> FloatTensor [B, T]; includes "_mask"
    # The same token ids and inputs on the host: what the engine decides from them (which
    # positions train, how prefixes are laid out) is decided there, without a device sync.
    host_tokens: np.ndarray
    host_inputs: dict[str, np.ndarray]
    # (rows, prefix length) of each group of rows here that start with the same `prefix` tokens,
    # which the decoder runs once per group (empty: nothing shared). Rows index this micro-batch.
    shared: list[tuple[list[int], int]] = field(default_factory=list)
    # (row, first position) of each datum in the layout: (i, 0) for the i-th padded row; in a
    # packed micro-batch every datum is in row 0, one after another.
    places: list[tuple[int, int]] = field(default_factory=list)
    # Position ids [1, T] restarting at every packed datum's start, and the datums' cumulative
    # lengths [0, n_0, n_0 + n_1, ...] (int32); None when padded.
    position_ids: Any = None
    # The forward's image arguments (pixel_values, image_grid_thw, mm_token_type_ids and M-RoPE
    # position_ids [3, B, T]) when a row here has an image; None otherwise.
    images: dict[str, Any] | None = None
    cu_seqlens: Any = None

    def decoder_kwargs(self) -> dict[str, Any]:
        """What the decoder takes besides the token ids: nothing for padded rows; for a packed row,
        its positions and layout (attention.packed_kwargs)."""
        if self.position_ids is None:
            return {}
        return packed_kwargs(self.lengths, self.position_ids, self.cu_seqlens)

    def spans(self) -> list[tuple[int, int, int, int]]:
        """(datum index, row, first position, length) of every datum here."""
        return [
            (i, row, start, n)
            for i, n, (row, start) in zip(self.indices, self.lengths, self.places, strict=True)
        ]


def expand_datum(datum: types.Datum, index: int, vision: Vision | None) -> Expanded:
    """The datum's model input as token ids (and images, on a vision-language model)."""
    if vision is None:
        return Expanded(text_only(datum.model_input, "the model", f"datum {index}"), [])
    return vision.expand(datum.model_input, f"datum {index}")


def check_token_ids(tokens: Sequence[int], vocab_size: int, where: str) -> None:
    """A clear error for ids the model has no embedding for (torch would say 'index out of range')."""
    bad = [t for t in tokens if not 0 <= t < vocab_size]
    if bad:
        raise BackendError(
            f"{where}: token id {bad[0]} is outside the vocabulary (ids 0 to {vocab_size - 1})"
            + (f"; {len(bad) - 1} more" if len(bad) > 1 else "")
        )


def _array(datum: types.Datum, key: str, index: int) -> np.ndarray:
    value = datum.loss_fn_inputs.get(key)
    if value is None:
        raise BackendError(
            f"datum {index}: loss_fn_inputs has no {key!r}; present: {sorted(datum.loss_fn_inputs)}"
        )
    return np.asarray(value.to_numpy())


@dataclass(frozen=True)
class LossInputs:
    """What a loss reads of each datum besides target_tokens: `keys`, in every datum; `optional`,
    used where present and `fills[key]` elsewhere."""

    keys: Sequence[str] = ()
    optional: Sequence[str] = ()
    fills: Mapping[str, float] = field(default_factory=dict)


TARGETS_ONLY = LossInputs()


@dataclass(frozen=True)
class BatchTarget:
    """The model the micro-batches are for: its `device`; with `vocab_size` and `max_context`,
    token ids and lengths it cannot take are refused with the reason; `vision`: its image side
    (None: a text model, which refuses image chunks)."""

    device: Any
    vocab_size: int | None = None
    max_context: int | None = None
    vision: Vision | None = None


def plan_microbatches(
    data: Sequence[types.Datum],
    inputs: LossInputs,
    max_tokens: int,
    target: BatchTarget,
    packed: bool = False,
    expanded: Sequence[Expanded] | None = None,
) -> list[MicroBatch]:
    """Validate `data` and pack it, with the loss's `inputs`, for the model `target`.
    `packed`: the rows outside shared-prefix groups are laid end to end, padding-free.
    `expanded`: the data's inputs already expanded (their model_input is then not read)."""
    device, vision = target.device, target.vision
    vocab_size, max_context = target.vocab_size, target.max_context
    if not data:
        raise BackendError("no data: forward/backward needs at least one datum")
    expanded_N = (
        list(expanded)
        if expanded is not None
        else [expand_datum(d, i, vision) for i, d in enumerate(data)]
    )
    tokens_N = [e.tokens for e in expanded_N]
    with_images = any(e.images for e in expanded_N)
    packed = packed and not with_images
    for i, tokens in enumerate(tokens_N):
        if not tokens:
            raise BackendError(f"datum {i}: model_input is empty")
        if max_context is not None and len(tokens) > max_context:
            raise BackendError(
                f"datum {i}: model_input has {len(tokens)} tokens; the model takes at most "
                f"{max_context} (--context-length extends it, docs/memory.md)"
            )
        if vocab_size is not None:
            check_token_ids(tokens, vocab_size, f"datum {i}: model_input")
            targets = _array(data[i], "target_tokens", i).reshape(-1).tolist()
            check_token_ids(targets, vocab_size, f"datum {i}: target_tokens")
    shared = [] if with_images else prefix_groups(tokens_N, max_tokens)
    if packed:
        shared = [g for g in shared if _saving(tokens_N, g) >= PACKED_MIN_SAVING]
    grouped = {i for rows, _ in shared for i in rows}
    # Groups share micro-batches (one padded prefix pass for all, then one pass for their rows)
    # while the tokens through the decoder stay within max_tokens: small RL groups otherwise cost
    # a decoder pass each, whose per-op overhead outweighs their few tokens on a CPU.
    group_batches: list[list[tuple[list[int], int]]] = []
    for group in shared:
        if group_batches and _shared_cost(tokens_N, [*group_batches[-1], group]) <= max_tokens:
            group_batches[-1].append(group)
        else:
            group_batches.append([group])
    order = sorted(
        (i for i in range(len(data)) if i not in grouped), key=lambda i: -len(tokens_N[i])
    )
    batches = (
        _bins(order, tokens_N, max_tokens) if packed else _padded_bins(order, tokens_N, max_tokens)
    )
    out = []
    for groups in group_batches:
        rows = [i for group_rows, _ in groups for i in group_rows]
        mb = _pack(data, expanded_N, rows, inputs, device)
        start = 0
        for group_rows, prefix in groups:
            mb.shared.append((list(range(start, start + len(group_rows))), prefix))
            start += len(group_rows)
        out.append(mb)
    for rows in batches:
        mb = _pack(data, expanded_N, rows, inputs, device, packed)
        if vision is not None and any(expanded_N[i].images for i in rows):
            rows_B = [expanded_N[i] for i in rows]
            mb.images = image_arguments(rows_B, mb.host_tokens.shape[1], vision, device)
        out.append(mb)
    return out


def image_arguments(
    expanded_B: Sequence[Expanded], T: int, vision: Vision, device: Any
) -> dict[str, Any]:
    """The forward's image arguments for the rows `expanded_B`, right-padded to `T` tokens: every
    image's patches in row order, their grids, which tokens are image tokens, M-RoPE positions."""
    B = len(expanded_B)
    position_3BT = np.zeros((3, B, T), dtype=np.int64)
    kind_BT = np.zeros((B, T), dtype=np.int64)
    grids, pixels = [], []
    for row, e in enumerate(expanded_B):
        position_3BT[:, row, : len(e.tokens)] = mrope_positions(e, vision.merge_size)
        for start, image in e.images:
            kind_BT[row, start : start + image.tokens] = 1
            grids.append(image.grid_thw)
            pixels.append(image.pixel_values)
    grid_I3 = np.asarray(grids, dtype=np.int64).reshape(-1, 3)
    grid, kind, position = to_device(device, grid_I3, kind_BT, position_3BT)
    (pixel_values,) = to_device(device, np.concatenate(pixels))
    return {
        "pixel_values": pixel_values,
        "image_grid_thw": grid,
        "mm_token_type_ids": kind,
        "position_ids": position,
    }


def _padded_bins(order: list[int], tokens_N: list[list[int]], max_tokens: int) -> list[list[int]]:
    """Rows (sorted longest first) in micro-batches of at most `max_tokens` padded tokens; the
    first row of a micro-batch sets its padded length."""
    batches: list[list[int]] = []
    for i in order:
        if batches and (len(batches[-1]) + 1) * len(tokens_N[batches[-1][0]]) <= max_tokens:
            batches[-1].append(i)
        else:
            batches.append([i])
    return batches


def _bins(order: list[int], tokens_N: list[list[int]], max_tokens: int) -> list[list[int]]:
    """Rows (sorted longest first) packed first-fit into micro-batches of at most `max_tokens`
    real tokens; a row longer than that has one of its own."""
    batches: list[list[int]] = []
    used: list[int] = []
    for i in order:
        n = len(tokens_N[i])
        for b, total in enumerate(used):
            if total + n <= max_tokens:
                batches[b].append(i)
                used[b] += n
                break
        else:
            batches.append([i])
            used.append(n)
    return batches


def _saving(tokens_N: list[list[int]], group: tuple[list[int], int]) -> int:
    """Decoder tokens a group saves against its rows laid end to end unpadded."""
    rows, prefix = group
    return sum(len(tokens_N[i]) for i in rows) - _shared_cost(tokens_N, [group])


def _shared_cost(tokens_N: list[list[int]], groups: list[tuple[list[int], int]]) -> int:
    """Tokens through the decoder for `groups` in one micro-batch: every prefix padded to the
    longest, once per group, and every row's own tokens padded to the longest."""
    rest = max(len(tokens_N[i]) - prefix for rows, prefix in groups for i in rows)
    return (
        len(groups) * max(prefix for _, prefix in groups)
        + sum(len(rows) for rows, _ in groups) * rest
    )


def prefix_groups(tokens_N: list[list[int]], max_tokens: int) -> list[tuple[list[int], int]]:
    """(rows, shared prefix length) of the rows worth running as shared-prefix groups: neighbours
    in sorted order sharing >= MIN_SHARED_PREFIX tokens, grown while the group fits in `max_tokens`
    and costs fewer tokens (prefix once + every row's padded rest) than the rows alone, and than
    closing the group and starting another at the row (RL prompts that share a few-shot header
    but not their question form a group each, not one group on the header).
    Every row keeps at least one token of its own."""
    groups: list[tuple[list[int], int]] = []
    rows: list[int] = []
    prefix = 0
    for i in sorted(range(len(tokens_N)), key=lambda i: tokens_N[i]):
        if rows:
            candidate = [*rows, i]
            lengths = [len(tokens_N[r]) for r in candidate]
            common = min(prefix, _common_prefix(tokens_N[rows[0]], tokens_N[i]), min(lengths) - 1)
            cost = common + len(candidate) * (max(lengths) - common)
            closed = prefix + len(rows) * (max(lengths[:-1]) - prefix) + lengths[-1]
            if common >= MIN_SHARED_PREFIX and cost <= min(max_tokens, sum(lengths), closed):
                rows, prefix = candidate, common
                continue
            if len(rows) > 1:
                groups.append((rows, prefix))
        rows, prefix = [i], len(tokens_N[i])
    if len(rows) > 1:
        groups.append((rows, prefix))
    return groups


def _common_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def left_padded(sequences: Sequence[Sequence[int]], device: Any) -> tuple[Any, dict[str, Any]]:
    """`sequences` as ids [G, L] on `device`, left-padded to the longest, and the forward kwargs
    the padding needs: an attention mask and position ids counted from each sequence's first real
    token (none when all are as long, which keeps SDPA's mask-free causal path). The batched
    prefill of sampling and the shared-prefix pass of training use it."""
    ids_GL, mask_GL = left_padded_host(sequences)
    if mask_GL is None:
        (ids,) = to_device(device, ids_GL)
        return ids, {}
    position_GL = np.maximum(mask_GL.cumsum(-1) - 1, 0)
    ids, mask, position = to_device(device, ids_GL, mask_GL, position_GL)
    return ids, {"attention_mask": mask, "position_ids": position}


def left_padded_host(
    sequences: Sequence[Sequence[int] | np.ndarray],
) -> tuple[np.ndarray, np.ndarray | None]:
    """`sequences` as int64 ids [G, L] left-padded to the longest, and the mask of real tokens
    (None when all are as long)."""
    lengths = [len(s) for s in sequences]
    width = max(lengths)
    ids_GL = np.zeros((len(sequences), width), dtype=np.int64)
    mask_GL = np.zeros_like(ids_GL)
    for i, (sequence, n) in enumerate(zip(sequences, lengths, strict=True)):
        ids_GL[i, width - n :] = sequence
        mask_GL[i, width - n :] = 1
    return ids_GL, None if min(lengths) == width else mask_GL


def to_device(device: Any, *arrays: np.ndarray) -> list[Any]:
    """Host arrays of one dtype as tensors on `device`, in one copy (each copy to an accelerator
    costs a call into its driver and a staging pass from pageable memory)."""
    import torch

    if len({a.dtype for a in arrays}) != 1:
        raise ValueError(f"to_device takes arrays of one dtype; got {[a.dtype for a in arrays]}")
    flat = torch.from_numpy(np.concatenate([a.reshape(-1) for a in arrays])).to(device)
    return [
        part.view(a.shape)
        for part, a in zip(flat.split([a.size for a in arrays]), arrays, strict=True)
    ]


def _pack(
    data: Sequence[types.Datum],
    expanded_N: list[Expanded],
    rows: list[int],
    loss_inputs: LossInputs,
    device: Any,
    packed: bool = False,
) -> MicroBatch:
    input_keys, optional_keys, fill_values = (
        loss_inputs.keys,
        loss_inputs.optional,
        loss_inputs.fills,
    )
    tokens_N = [e.tokens for e in expanded_N]
    lengths = [len(tokens_N[i]) for i in rows]
    if packed:
        places = [(0, start) for start in np.cumsum([0, *lengths[:-1]]).tolist()]
        B, T = 1, sum(lengths)
    else:
        places = [(row, 0) for row in range(len(rows))]
        B, T = len(rows), max(lengths)
    tokens_BT = np.zeros((B, T), dtype=np.int64)
    mask_BT = np.zeros((B, T), dtype=np.float32)
    targets_N = [_array(data[i], "target_tokens", i) for i in rows]
    extra_dims = {t.shape[1:] for t in targets_N}
    if len(extra_dims) != 1:
        raise BackendError(
            f"target_tokens shapes differ across the batch: {sorted(map(tuple, extra_dims))}"
        )
    targets = np.zeros((B, T, *targets_N[0].shape[1:]), dtype=np.int64)
    values: dict[str, np.ndarray] = {
        k: np.zeros((B, T, *targets_N[0].shape[1:]), np.float32) for k in input_keys
    }
    present = [k for k in optional_keys if any(k in data[i].loss_fn_inputs for i in rows)]
    values.update({k: np.zeros((B, T), np.float32) for k in present})
    position_BT = np.zeros((B, T), dtype=np.int64)
    for k, (i, n, (row, start)) in enumerate(zip(rows, lengths, places, strict=True)):
        at = (row, slice(start, start + n))
        tokens_BT[at] = tokens_N[i]
        mask_BT[at] = 1.0
        position_BT[at] = np.arange(n)
        _put(targets, at, targets_N[k], n, i, "target_tokens")
        for key in input_keys:
            _put(values[key], at, _array(data[i], key, i), n, i, key)
        for key in present:
            if key in data[i].loss_fn_inputs:
                array = _array(data[i], key, i)
                _put(
                    values[key],
                    at,
                    np.broadcast_to(array, (n,)) if array.size == 1 else array,
                    n,
                    i,
                    key,
                )
            else:
                values[key][at] = fill_values.get(key, 1.0)
    values["_mask"] = mask_BT
    inputs = dict(zip(values, to_device(device, *values.values()), strict=True))
    position_ids = cu_seqlens = None
    if packed:
        cu_N = np.cumsum([0, *lengths])
        tokens, targets_dev, position_ids, cu_seqlens = to_device(
            device, tokens_BT, targets, position_BT, cu_N
        )
        cu_seqlens = cu_seqlens.int()  # the kernel's index type; converted on the device
    else:
        tokens, targets_dev = to_device(device, tokens_BT, targets)
    return MicroBatch(
        indices=list(rows),
        lengths=lengths,
        tokens=tokens,
        targets=targets_dev,
        inputs=inputs,
        host_tokens=tokens_BT,
        host_inputs=values,
        places=places,
        position_ids=position_ids,
        cu_seqlens=cu_seqlens,
    )


def _put(
    out: np.ndarray, at: tuple[int, slice], array: np.ndarray, n: int, index: int, key: str
) -> None:
    expected = (n, *out.shape[2:])
    if array.shape != expected:
        raise BackendError(
            f"datum {index}: loss_fn_inputs[{key!r}] has shape {list(array.shape)}; expected {list(expected)} "
            f"(one entry per model_input token)"
        )
    out[at] = array
