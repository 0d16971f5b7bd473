"""Trajectories -> training datums for the policy-gradient losses.

Each datum holds a token sequence shifted for next-token prediction, and per target position:
`target_tokens`, `logprobs` (the sampler's, 0 on observation tokens), `advantages` (each turn's
advantage on its action tokens, 0 elsewhere) and `mask` (1 on action tokens). Multi-turn
episodes whose next observation extends the previous observation + action share one datum; when
an observation is not such an extension (the env rewrote history), a new datum starts. Same
layout as tinker-cookbook 0.6.1's `trajectory_to_data`.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

import numpy as np
from tinker import types

from train_core.losses import MASK_INPUTS
from train_core.rl.types import PARSE_ERROR_MASKED_METRIC_KEY, Trajectory, TrajectoryGroup

logger = logging.getLogger(__name__)

FlatElem: TypeAlias = int | types.ModelInputChunk
"""A text token, or a whole non-text chunk (image ...) that is compared and kept as one unit."""

ProvenanceSpan: TypeAlias = types.PromptProvenanceSpan | types.SampledProvenanceSpan


def flatten_chunks(chunks: Sequence[types.ModelInputChunk]) -> list[FlatElem]:
    """Text chunks become their tokens; other chunks stay whole."""
    out: list[FlatElem] = []
    for chunk in chunks:
        if isinstance(chunk, types.EncodedTextChunk):
            out.extend(int(t) for t in chunk.tokens)
        else:
            out.append(chunk)
    return out


def flat_token_length(flat: Sequence[FlatElem]) -> int:
    return sum(1 if isinstance(e, int) else e.length for e in flat)


def flat_to_model_input(flat: Sequence[FlatElem]) -> types.ModelInput:
    """Runs of tokens become one EncodedTextChunk each; other chunks are kept in place."""
    chunks: list[types.ModelInputChunk] = []
    run: list[int] = []
    for elem in flat:
        if isinstance(elem, int):
            run.append(elem)
            continue
        if run:
            chunks.append(types.EncodedTextChunk(tokens=run))
            run = []
        chunks.append(elem)
    if run:
        chunks.append(types.EncodedTextChunk(tokens=run))
    return types.ModelInput(chunks=chunks)


def _is_prefix(prefix: Sequence[FlatElem], seq: Sequence[FlatElem]) -> bool:
    return len(prefix) <= len(seq) and list(seq[: len(prefix)]) == list(prefix)


@dataclass
class _Sequence:
    """The datum being built: the unshifted sequence and its per-token columns."""

    include_provenance: bool
    flat: list[FlatElem] = field(default_factory=list)
    logprobs_T: list[float] = field(default_factory=list)
    advantages_T: list[float] = field(default_factory=list)
    mask_T: list[float] = field(default_factory=list)
    spans: list[ProvenanceSpan] | None = None
    """Where each token came from, while every action so far has a sequence_id."""

    def __post_init__(self) -> None:
        self.spans = [] if self.include_provenance else None

    def to_datum(self) -> types.Datum:
        n_tokens = len(self.mask_T)
        if n_tokens < 2:
            raise ValueError(
                f"trajectory_to_data: a datum needs at least 2 tokens to shift, got {n_tokens}"
            )
        if not isinstance(self.flat[-1], int):
            raise ValueError(
                "trajectory_to_data: the sequence ends in a non-text chunk "
                f"({type(self.flat[-1]).__name__}); expected it to end with a token"
            )
        all_tokens_T: list[int] = []
        for elem in self.flat:
            # Non-text positions carry no loss (mask 0); their target id is a placeholder 0.
            all_tokens_T.extend([elem] if isinstance(elem, int) else [0] * elem.length)
        datum = types.Datum(
            model_input=flat_to_model_input(self.flat[:-1]),
            loss_fn_inputs={
                "target_tokens": types.TensorData.from_numpy(
                    np.asarray(all_tokens_T[1:], dtype=np.int64)
                ),
                "logprobs": _float_tensor(self.logprobs_T[1:]),
                "advantages": _float_tensor(self.advantages_T[1:]),
                "mask": _float_tensor(self.mask_T[1:]),
            },
        )
        if not self.spans:
            return datum
        # Inputs drop the sequence's last position; targets drop its first.
        target_spans = _drop_first_position(self.spans)
        if not any(isinstance(s, types.SampledProvenanceSpan) for s in target_spans):
            return datum
        return datum.with_provenance(
            model_input=_drop_last_position(self.spans), loss_fn_inputs=target_spans
        )


def _float_tensor(values: list[float]) -> types.TensorData:
    return types.TensorData.from_numpy(np.asarray(values, dtype=np.float32))


def _drop_first_position(spans: list[ProvenanceSpan]) -> list[ProvenanceSpan]:
    first, rest = spans[0], spans[1:]
    if first.length == 1:
        return rest
    return [dataclasses.replace(first, offset=first.offset + 1, length=first.length - 1), *rest]


def _drop_last_position(spans: list[ProvenanceSpan]) -> list[ProvenanceSpan]:
    last, rest = spans[-1], spans[:-1]
    if last.length == 1:
        return rest
    return [*rest, dataclasses.replace(last, length=last.length - 1)]


def turn_advantages(traj: Trajectory, traj_advantage: float | Sequence[float]) -> list[float]:
    """advantages_T, one per turn: a per-trajectory advantage broadcast to every turn, or the
    trajectory's own per-turn advantages (checked for length)."""
    n_turns = len(traj.transitions)
    values = np.asarray(traj_advantage, dtype=np.float64)
    if values.ndim == 0:
        return [float(values)] * n_turns
    if values.shape != (n_turns,):
        raise ValueError(
            f"trajectory_to_data: {n_turns} turns but advantages of shape {values.shape}; "
            "expected one per turn (or one for the whole trajectory)"
        )
    return [float(v) for v in values]


def trajectory_to_data(
    traj: Trajectory, traj_advantage: float | Sequence[float], include_provenance: bool = True
) -> list[types.Datum]:
    """One datum per run of turns whose observations extend each other; see the module doc.
    `traj_advantage`: one advantage for every turn, or one per turn.

    With `include_provenance`, a datum also records where its tokens came from (prompt positions
    of the sampling request, sampled tokens of a sequence) when every action in it has a
    `sequence_id` and at least one target is a sampled token.
    """
    data: list[types.Datum] = []
    seq = _Sequence(include_provenance)
    advantages_T = turn_advantages(traj, traj_advantage)
    for transition, advantage in zip(traj.transitions, advantages_T, strict=True):
        ob_flat = flatten_chunks(transition.ob.chunks)
        if not seq.flat:
            delta_flat = ob_flat
        elif _is_prefix(seq.flat, ob_flat):
            delta_flat = ob_flat[len(seq.flat) :]
        else:
            data.append(seq.to_datum())
            seq = _Sequence(include_provenance)
            delta_flat = ob_flat
        delta_len = flat_token_length(delta_flat)
        action = transition.ac
        action_tokens = list(action.tokens)
        _record_provenance(seq, getattr(action, "sequence_id", None), delta_len, action_tokens)

        masked = float(transition.metrics.get(PARSE_ERROR_MASKED_METRIC_KEY, 0.0)) >= 1.0
        n_ac = len(action_tokens)
        seq.flat.extend(delta_flat)
        seq.flat.extend(action_tokens)
        seq.logprobs_T.extend([0.0] * delta_len + [float(x) for x in _action_logprobs(action)])
        seq.advantages_T.extend([0.0] * delta_len + [0.0 if masked else advantage] * n_ac)
        seq.mask_T.extend([0.0] * delta_len + [0.0 if masked else 1.0] * n_ac)
    if seq.flat:
        data.append(seq.to_datum())
    return data


def _action_logprobs(action: Any) -> list[float]:
    logprobs = action.logprobs
    if len(logprobs) != len(action.tokens):
        raise ValueError(
            f"trajectory_to_data: action has {len(action.tokens)} tokens but {len(logprobs)} "
            "logprobs; expected one logprob per sampled token"
        )
    return list(logprobs)


def _record_provenance(
    seq: _Sequence, sequence_id: str | None, delta_len: int, action_tokens: list[int]
) -> None:
    if sequence_id is None:
        # A turn with no tokens adds nothing to attribute; any other turn without an id voids it.
        if delta_len > 0 or action_tokens:
            seq.spans = None
        return
    if seq.spans is None:
        return
    if delta_len > 0:
        # The new observation tokens are the tail of this request's prompt.
        offset = flat_token_length(seq.flat)
        seq.spans.append(
            types.PromptProvenanceSpan(sequence_id=sequence_id, offset=offset, length=delta_len)
        )
    if action_tokens:
        seq.spans.append(
            types.SampledProvenanceSpan(sequence_id=sequence_id, length=len(action_tokens))
        )


def assemble_training_data(
    trajectory_groups_P: Sequence[TrajectoryGroup],
    advantages_P: Sequence[Sequence[float | Sequence[float]] | np.ndarray],
    include_provenance: bool = True,
) -> tuple[list[types.Datum], list[dict[str, int]]]:
    """Flat datums for a batch, and per datum its {"group_idx", "traj_idx"}. Per group, per
    trajectory: one advantage for all its turns, or one per turn (`compute_turn_advantages`)."""
    if len(trajectory_groups_P) != len(advantages_P):
        raise ValueError(
            f"assemble_training_data: {len(trajectory_groups_P)} groups but "
            f"{len(advantages_P)} advantage arrays; expected one per group"
        )
    data_D: list[types.Datum] = []
    metadata_D: list[dict[str, int]] = []
    for i_group, (group, advantages_G) in enumerate(
        zip(trajectory_groups_P, advantages_P, strict=True)
    ):
        if len(advantages_G) != len(group.trajectories_G):
            raise ValueError(
                f"assemble_training_data: group {i_group} has {len(group.trajectories_G)} "
                f"trajectories but {len(advantages_G)} advantages; expected one per trajectory"
            )
        for i_traj, (traj, advantage) in enumerate(
            zip(group.trajectories_G, advantages_G, strict=True)
        ):
            new_data = trajectory_to_data(traj, advantage, include_provenance)
            data_D.extend(new_data)
            metadata_D.extend({"group_idx": i_group, "traj_idx": i_traj} for _ in new_data)
    return data_D, metadata_D


def all_same(values: Sequence[Any]) -> bool:
    """True when every element equals the first (and for an empty sequence)."""
    return all(v == values[0] for v in values)


def remove_constant_reward_groups(
    trajectory_groups_P: Sequence[TrajectoryGroup],
) -> list[TrajectoryGroup]:
    """Drop groups whose trajectories all got the same total reward: zero advantage, no signal.

    If every group is constant, the first one is kept (as tinker-cookbook does) so downstream
    stages never see an empty batch; its advantages are all zero, so it trains nothing.
    """
    kept = [g for g in trajectory_groups_P if not all_same(g.get_total_rewards())]
    if not kept and trajectory_groups_P:
        logger.warning("all groups have uniform rewards; this batch carries no gradient")
        return list(trajectory_groups_P[:1])
    return kept


def keep_informative_groups(
    trajectory_groups_P: Sequence[TrajectoryGroup], advantages_P: Sequence[Any]
) -> tuple[list[TrajectoryGroup], list[Any]]:
    """The groups `remove_constant_reward_groups` keeps, with their advantages still aligned."""
    kept = {id(g) for g in remove_constant_reward_groups(trajectory_groups_P)}
    pairs = [
        (g, a) for g, a in zip(trajectory_groups_P, advantages_P, strict=True) if id(g) in kept
    ]
    return [g for g, _ in pairs], [a for _, a in pairs]


def datum_for_loss(datum: types.Datum, loss_fn: str) -> types.Datum:
    """The datum as `loss_fn` takes it: its `mask` column (the action tokens), which Tinker's RL
    losses do not take under that name, dropped, or renamed to the input the loss reads it as
    (gspo's sequence_ratio_mask, losses.MASK_INPUTS).

    The mask stays on the assembled datums for metrics (KL over action tokens); this runs right
    before forward_backward. Provenance and other fields are kept.
    """
    inputs = {k: v for k, v in datum.loss_fn_inputs.items() if k != "mask"}
    if loss_fn in MASK_INPUTS and "mask" in datum.loss_fn_inputs:
        inputs[MASK_INPUTS[loss_fn]] = datum.loss_fn_inputs["mask"]
    return dataclasses.replace(datum, loss_fn_inputs=inputs)
