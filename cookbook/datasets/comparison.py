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
- `allenai/llama-3.1-tulu-3-8b-preference-mixture`: prompt (a string), chosen and rejected
  ([user, assistant] messages); the prompt against the two assistant turns, label "A".
- `lmarena-ai/arena-human-preference-140k`: conversation_a / conversation_b (messages whose
  content is a list of typed parts), winner model_a | model_b (ties and both_bad skipped); the
  first message is the prompt, the rest of each conversation its completion. A conversation with
  a part that is not text (an image) is skipped, as tinker-cookbook skips it.
- `nvidia/HelpSteer2`: one row per response (prompt, response, helpfulness 0..4 ...). Its rows are
  first grouped by prompt (`HelpSteer2Pairs.group`): the most helpful response against the least,
  when it is strictly more helpful (label "A"); a prompt whose responses tie gives no comparison.

Converters return None for a row that is well-formed but unusable (skipped and counted by
`convert_rows`) and raise DataError, with the row's locator and field, for a malformed one.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
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


def _assistant_turn(row: Mapping[str, Any], key: str, where: str) -> Message:
    """The assistant turn of a [user, assistant] conversation field."""
    messages = validate_messages(require(row, key, where, "[user, assistant] messages"), where, key)
    if len(messages) < 2 or messages[1]["role"] != "assistant":
        raise bad_field(where, field_path(key, 1), messages[1:2] or None, "an assistant message")
    return {"role": "assistant", "content": messages[1]["content"]}


def tulu3_preference_row(row: Mapping[str, Any], where: str = "row") -> dict[str, Any]:
    """`allenai/llama-3.1-tulu-3-8b-preference-mixture` -> comparison, label "A" (chosen)."""
    return make_comparison(
        [{"role": "user", "content": require_str(row, "prompt", where)}],
        [_assistant_turn(row, "chosen", where)],
        [_assistant_turn(row, "rejected", where)],
        "A",
    )


ARENA_WINNERS = {"model_a": "A", "model_b": "B"}


def _arena_messages(value: Any, where: str, key: str) -> list[Message] | None:
    """An arena conversation as text messages: each message's text parts joined by a space;
    None when a part is not text. System turns are dropped, as tinker-cookbook drops them."""
    if not isinstance(value, list | tuple):
        raise bad_field(where, field_path(key), value, "an array of messages")
    out: list[Message] = []
    for i, message in enumerate(value):
        if not isinstance(message, Mapping) or "role" not in message:
            raise bad_field(where, field_path(key, i), message, 'an object {"role", "content"}')
        parts = message.get("content")
        if not isinstance(parts, list | tuple):
            raise bad_field(where, field_path(key, i, "content"), parts, "an array of parts")
        texts = []
        for part in parts:
            if not isinstance(part, Mapping) or part.get("type") != "text":
                return None
            texts.append(str(part.get("text") or ""))
        if texts and message["role"] in ("user", "assistant"):
            out.append({"role": message["role"], "content": " ".join(texts)})
    return out


def arena_row(row: Mapping[str, Any], where: str = "row") -> dict[str, Any] | None:
    """`lmarena-ai/arena-human-preference-140k` -> comparison labelled by the winner; None for a
    tie, both_bad, a non-text part, or a conversation that is not a prompt and an answer."""
    winner = require(row, "winner", where, "model_a, model_b, tie or both_bad")
    if not isinstance(winner, str):
        raise bad_field(where, field_path("winner"), winner, "model_a, model_b, tie or both_bad")
    label = ARENA_WINNERS.get(winner)
    a = _arena_messages(require(row, "conversation_a", where, "messages"), where, "conversation_a")
    b = _arena_messages(require(row, "conversation_b", where, "messages"), where, "conversation_b")
    if label is None or not a or not b or len(a) < 2 or len(b) < 2:
        return None
    if a[-1]["role"] != "assistant" or b[-1]["role"] != "assistant":
        return None
    return make_comparison(a[:1], a[1:], b[1:], label)


class HelpSteer2Pairs:
    """`nvidia/HelpSteer2`: a row per response, compared per prompt. `group` turns the rows into
    one {"prompt", "chosen_response", "rejected_response", "helpfulness_diff"} per prompt (its
    most helpful response against its least, when strictly more helpful; equal scores keep the
    dataset's order); calling it converts one of those into a comparison, label "A"."""

    def group(
        self, rows: Sequence[Mapping[str, Any]], where: Callable[[int], str]
    ) -> list[dict[str, Any]]:
        by_prompt: dict[str, list[tuple[int, str]]] = {}
        for i, row in enumerate(rows):
            prompt = require_str(row, "prompt", where(i))
            response = require_str(row, "response", where(i))
            score = require(row, "helpfulness", where(i), "an integer in 0..4")
            if isinstance(score, bool) or not isinstance(score, int):
                raise bad_field(where(i), field_path("helpfulness"), score, "an integer in 0..4")
            by_prompt.setdefault(prompt, []).append((score, response))
        pairs = []
        for prompt, responses in by_prompt.items():
            ranked = sorted(responses, key=lambda r: r[0], reverse=True)  # stable: ties in order
            (best, chosen), (worst, rejected) = ranked[0], ranked[-1]
            if best > worst:
                pairs.append({"prompt": prompt, "chosen_response": chosen,
                              "rejected_response": rejected, "helpfulness_diff": best - worst})  # fmt: skip
        return pairs

    def __call__(self, row: Mapping[str, Any], where: str = "row") -> dict[str, Any]:
        out = make_comparison(
            [{"role": "user", "content": require_str(row, "prompt", where)}],
            [{"role": "assistant", "content": require_str(row, "chosen_response", where)}],
            [{"role": "assistant", "content": require_str(row, "rejected_response", where)}],
            "A",
        )
        return {**out, "helpfulness_diff": row.get("helpfulness_diff")}


helpsteer2_pairs = HelpSteer2Pairs()


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
    if "conversation_a" in row:
        return arena_row(row, where)
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
