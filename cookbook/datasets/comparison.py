"""The comparison row: one prompt, two completions, which one a labeller preferred.

Schema (plain dicts, so any layer can read it without importing a type):

    {
      "prompt_conversation": [Message, ...],   # the shared context, user turn last
      "completion_A": [Message, ...],          # usually one assistant message
      "completion_B": [Message, ...],
      "label": "A" | "B" | "Tie",              # which completion is preferred
    }

It mirrors tinker-cookbook's `LabeledComparison(comparison=Comparison(prompt_conversation,
completion_A, completion_B), label)`; `train_core.preference` defines those types, and a row
converts with `LabeledComparison(comparison=Comparison(**{k: row[k] for k in COMPARISON_KEYS}),
label=row["label"])`. Extra keys (a `kind` tag, a source id) may ride along and are ignored.

Converters from the public preference datasets to this row, as tinker-cookbook maps them:

- `Anthropic/hh-rlhf`: chosen / rejected are whole transcripts "\\n\\nHuman: ...\\n\\nAssistant: ...";
  the turns both share become the prompt, the differing last assistant turns the completions,
  label "A" (chosen). Rows whose transcripts do not share all but the last turn are skipped (None).
- `nvidia/HelpSteer3` (config "preference"): context (messages), response1, response2,
  overall_preference in -3..3; negative prefers response1 ("A"), positive response2 ("B"),
  0 is a "Tie" (tinker-cookbook drops ties; `load_comparisons` does too by default).
- `argilla/ultrafeedback-binarized-preferences`: instruction, chosen_response, rejected_response.
- TRL-style local files: {"prompt", "chosen", "rejected"} as strings or message lists, or
  {"chosen", "rejected"} message lists that share their prompt turns.

Converters return None for a row that is well-formed but unusable (skipped and counted by
`convert_rows`) and raise DataError, with the row's locator and field, for a malformed one.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from cookbook.datasets.chat import validate_messages
from cookbook.datasets.fields import bad_field, field_path, require, require_str
from kitchen.engine.errors import DataError
from train_core.renderers.types import Message

LABELS = ("A", "B", "Tie")
COMPARISON_KEYS = ("prompt_conversation", "completion_A", "completion_B")


def make_comparison(
    prompt_conversation: list[Message],
    completion_A: list[Message],
    completion_B: list[Message],
    label: str,
) -> dict[str, Any]:
    """A comparison row; `label` names the preferred completion."""
    if label not in LABELS:
        raise ValueError(f"label {label!r} is not one of {', '.join(LABELS)}")
    return {
        "prompt_conversation": prompt_conversation,
        "completion_A": completion_A,
        "completion_B": completion_B,
        "label": label,
    }


def comparison_row(row: Mapping[str, Any], where: str = "row") -> dict[str, Any]:
    """Validate a row already in the comparison shape (the bundled `prefs`, local JSONL)."""
    expected = 'a non-empty array of {"role", "content"} messages'
    parts = {
        key: validate_messages(require(row, key, where, expected), where, key)
        for key in COMPARISON_KEYS
    }
    label = require(row, "label", where, "one of " + ", ".join(LABELS))
    if label not in LABELS:
        raise bad_field(where, field_path("label"), label, "one of " + ", ".join(LABELS))
    out = make_comparison(
        parts["prompt_conversation"], parts["completion_A"], parts["completion_B"], label
    )
    out.update({k: v for k, v in row.items() if k not in out})
    return out


def chosen_and_rejected(
    comparison: Mapping[str, Any],
) -> tuple[list[Message], list[Message], list[Message]] | None:
    """(prompt_conversation, chosen, rejected) for a labelled comparison; None for a tie."""
    if comparison["label"] == "Tie":
        return None
    a, b = comparison["completion_A"], comparison["completion_B"]
    chosen, rejected = (a, b) if comparison["label"] == "A" else (b, a)
    return comparison["prompt_conversation"], chosen, rejected


def swapped(comparison: Mapping[str, Any]) -> dict[str, Any]:
    """The same judgement with A and B exchanged (for position-debiasing or augmentation)."""
    label = {"A": "B", "B": "A", "Tie": "Tie"}[comparison["label"]]
    out = dict(comparison)
    out.update(
        completion_A=comparison["completion_B"],
        completion_B=comparison["completion_A"],
        label=label,
    )
    return out


_HH_TURN_RE = re.compile(r"\n\n(Human|Assistant):[ ]?")
_HH_ROLES = {"Human": "user", "Assistant": "assistant"}


def parse_hh_transcript(text: str) -> list[Message]:
    """ "\\n\\nHuman: hi\\n\\nAssistant: hello" -> [{"role": "user", ...}, {"role": "assistant", ...}]."""
    if not text.startswith("\n\n"):
        text = "\n\n" + text.lstrip()
    parts = _HH_TURN_RE.split(text)
    # parts = [preamble, speaker, content, speaker, content, ...]
    return [
        {"role": _HH_ROLES[speaker], "content": content.strip()}
        for speaker, content in zip(parts[1::2], parts[2::2], strict=True)
    ]


def split_shared_prompt(
    chosen: list[Message], rejected: list[Message]
) -> tuple[list[Message], Message, Message] | None:
    """(shared turns, chosen last turn, rejected last turn) when the two conversations differ only
    in a final assistant turn; None otherwise."""
    if len(chosen) != len(rejected) or len(chosen) < 2:
        return None
    if chosen[:-1] != rejected[:-1] or chosen[-1] == rejected[-1]:
        return None
    if chosen[-1]["role"] != "assistant" or rejected[-1]["role"] != "assistant":
        return None
    return chosen[:-1], chosen[-1], rejected[-1]


def hh_rlhf_row(row: Mapping[str, Any], where: str = "row") -> dict[str, Any] | None:
    """`Anthropic/hh-rlhf` {"chosen", "rejected"} transcripts -> comparison, label "A"."""
    chosen = parse_hh_transcript(require_str(row, "chosen", where))
    rejected = parse_hh_transcript(require_str(row, "rejected", where))
    shared = split_shared_prompt(chosen, rejected)
    if shared is None:
        return None
    prompt, chosen_turn, rejected_turn = shared
    return make_comparison(prompt, [chosen_turn], [rejected_turn], "A")


def helpsteer3_row(row: Mapping[str, Any], where: str = "row") -> dict[str, Any]:
    """`nvidia/HelpSteer3` preference rows -> comparison; the label follows overall_preference."""
    context = validate_messages(
        require(row, "context", where, "an array of messages"), where, "context"
    )
    response1 = require_str(row, "response1", where)
    response2 = require_str(row, "response2", where)
    preference = require(row, "overall_preference", where, "an integer in -3..3")
    if isinstance(preference, bool) or not isinstance(preference, int) or not -3 <= preference <= 3:
        raise bad_field(where, field_path("overall_preference"), preference, "an integer in -3..3")
    label = "A" if preference < 0 else "B" if preference > 0 else "Tie"
    return make_comparison(
        context,
        [{"role": "assistant", "content": response1}],
        [{"role": "assistant", "content": response2}],
        label,
    )


def ultrafeedback_row(row: Mapping[str, Any], where: str = "row") -> dict[str, Any]:
    """`argilla/ultrafeedback-binarized-preferences` -> comparison, label "A" (chosen)."""
    return make_comparison(
        [{"role": "user", "content": require_str(row, "instruction", where)}],
        [{"role": "assistant", "content": require_str(row, "chosen_response", where)}],
        [{"role": "assistant", "content": require_str(row, "rejected_response", where)}],
        "A",
    )


def trl_preference_row(row: Mapping[str, Any], where: str = "row") -> dict[str, Any] | None:
    """TRL's preference shapes, explicit prompt or implicit (shared turns), strings or messages."""
    if "prompt" in row:
        prompt = _as_messages(row["prompt"], "user", where, "prompt")
        chosen = _as_messages(
            require(row, "chosen", where, "a string or messages"), "assistant", where, "chosen"
        )
        rejected = _as_messages(
            require(row, "rejected", where, "a string or messages"), "assistant", where, "rejected"
        )
        return make_comparison(prompt, chosen, rejected, "A")
    chosen = validate_messages(require(row, "chosen", where, "messages"), where, "chosen")
    rejected = validate_messages(require(row, "rejected", where, "messages"), where, "rejected")
    shared = split_shared_prompt(chosen, rejected)
    if shared is None:
        return None
    prompt, chosen_turn, rejected_turn = shared
    return make_comparison(prompt, [chosen_turn], [rejected_turn], "A")


def preference_row(row: Mapping[str, Any], where: str = "row") -> dict[str, Any] | None:
    """Any of the shapes above, recognised by its keys (for local files of unknown origin)."""
    if not isinstance(row, Mapping):
        raise DataError(f"{where}: row is not an object; expected a preference pair")
    if "prompt_conversation" in row:
        return comparison_row(row, where)
    if "chosen_response" in row:
        return ultrafeedback_row(row, where)
    if "overall_preference" in row:
        return helpsteer3_row(row, where)
    if "chosen" in row and "prompt" not in row and isinstance(row["chosen"], str):
        return hh_rlhf_row(row, where)
    if "chosen" in row:
        return trl_preference_row(row, where)
    raise DataError(
        f"{where}: row has none of the preference shapes' fields; expected "
        '"prompt_conversation"/"completion_A"/"completion_B"/"label", "chosen"/"rejected", '
        '"instruction"/"chosen_response"/"rejected_response", or '
        '"context"/"response1"/"response2"/"overall_preference"'
    )


def _as_messages(value: Any, role: str, where: str, key: str) -> list[Message]:
    if isinstance(value, str):
        return [{"role": role, "content": value}]
    return validate_messages(value, where, key)
