"""Row-shape converters: upstream dataset rows -> plain dicts the recipes train on.

Shapes (each documented in its module): chat conversations (chat.py), comparisons and their
converters (comparison.py), GSM8K word problems (math.py), code problems with tests (code.py). Loaders that
pick the right converter for a source live in catalog.py.
"""

from cookbook.datasets.catalog import (
    ALIASES,
    KNOWN,
    Converted,
    KnownDataset,
    convert_rows,
    converter_for,
    known_dataset,
    load_chat,
    load_code,
    load_comparisons,
    load_converted,
    load_math,
    load_prompts,
    resolve_source,
)
from cookbook.datasets.chat import ROLES, chat_row, no_robots_row, tulu3_row, validate_messages
from cookbook.datasets.code import deepcoder_row, normalize_tests
from cookbook.datasets.comparison import (
    COMPARISON_KEYS,
    LABELS,
    chosen_and_rejected,
    comparison_row,
    helpsteer3_row,
    hh_rlhf_row,
    make_comparison,
    parse_hh_transcript,
    preference_row,
    swapped,
    trl_preference_row,
    ultrafeedback_row,
)
from cookbook.datasets.math import extract_gsm8k_answer, gsm8k_row

__all__ = [
    "ALIASES",
    "COMPARISON_KEYS",
    "KNOWN",
    "LABELS",
    "ROLES",
    "Converted",
    "KnownDataset",
    "chat_row",
    "chosen_and_rejected",
    "comparison_row",
    "convert_rows",
    "converter_for",
    "deepcoder_row",
    "extract_gsm8k_answer",
    "gsm8k_row",
    "helpsteer3_row",
    "hh_rlhf_row",
    "known_dataset",
    "load_chat",
    "load_code",
    "load_comparisons",
    "load_converted",
    "load_math",
    "load_prompts",
    "make_comparison",
    "no_robots_row",
    "normalize_tests",
    "parse_hh_transcript",
    "preference_row",
    "resolve_source",
    "swapped",
    "trl_preference_row",
    "tulu3_row",
    "ultrafeedback_row",
    "validate_messages",
]
