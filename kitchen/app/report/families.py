"""Group metric keys into families (one chart each) by name pattern.

Keys follow tinker-cookbook's names (`train_mean_nll`, `test/nll`, `env/all/reward/total`,
`optim/kl_sample_train_v1`, `time/rollouts`, ...); any other key still gets a chart, grouped by
its first path segment."""

from __future__ import annotations

import re
from collections.abc import Iterable

# (family, pattern) in match priority: DPO's `chosen_reward` is an implicit reward that belongs
# with accuracy and margin, `num_loss_tokens` is a count, not a loss, and `tokens_per_second` a
# rate, not a count, so those rules come first.
RULES: tuple[tuple[str, str], ...] = (
    (
        "Accuracy and margin",
        r"accuracy|margin|chosen_reward|rejected_reward|win_rate|pass@|f1|precision|recall",
    ),
    ("Throughput", r"per_second$"),
    ("Memory", r"^memory/"),
    ("Tokens and data", r"tokens|^num_|/num_|datums|sequences|pairs"),
    ("Reward", r"reward|correct|format"),
    ("Loss / NLL", r"nll|loss|bpb|perplexity"),
    ("KL", r"(^|[/_])kl"),
    ("Entropy", r"entropy"),
    ("Learning rate", r"learning_rate|(^|/)lr$"),
    ("Grad norm", r"grad_norm|grad_l2|grad/"),
    ("Step time", r"^time/|_time$|seconds"),
    ("Progress", r"progress|epoch|^sampling_client/step|staleness|substeps"),
)
ORDER = (
    "Loss / NLL",
    "Reward",
    "Accuracy and margin",
    "KL",
    "Entropy",
    "Learning rate",
    "Grad norm",
    "Step time",
    "Throughput",
    "Memory",
    "Tokens and data",
    "Progress",
)
_COMPILED = tuple((family, re.compile(pattern)) for family, pattern in RULES)


def family_of(key: str) -> str:
    for family, pattern in _COMPILED:
        if pattern.search(key):
            return family
    head = key.split("/", 1)[0] if "/" in key else "other"
    return f"Other: {head}"


def group_keys(keys: Iterable[str]) -> dict[str, list[str]]:
    """Family -> its keys (sorted), families in reading order, the unmatched ones last."""
    groups: dict[str, list[str]] = {}
    for key in sorted(set(keys)):
        groups.setdefault(family_of(key), []).append(key)
    rank = {name: i for i, name in enumerate(ORDER)}
    return dict(sorted(groups.items(), key=lambda kv: (rank.get(kv[0], len(ORDER)), kv[0])))
