"""Training past a model's trained context: its rotary position embeddings (RoPE) rescaled at load.

A model reads at most `max_position_embeddings` positions, and the engine refuses longer rows.
`context_length` N above that sets one of the RoPE scalings transformers implements on the
model's config before the weights load, with factor N / the trained length:

- `yarn` (default): interpolates the low frequencies, keeps the high ones, and scales attention
  (YaRN, arXiv 2309.00071); what Qwen and Llama long-context releases use.
- `linear`: divides every position by the factor (position interpolation, arXiv 2306.15595).

Either changes what the model computes at every length, short rows included, so a model trained
so should be sampled with the same setting. A model without RoPE (learned position embeddings),
or whose RoPE is scaled already, is refused in one line.
"""

from __future__ import annotations

from typing import Any

from kitchen.engine.errors import ConfigError

ROPE_SCALINGS = ("yarn", "linear")


def extend_context(config: Any, context_length: int | None, scaling: str, model_name: str) -> Any:
    """`config` (a transformers PretrainedConfig, changed in place and returned) taking
    `context_length` positions with the RoPE `scaling`; unchanged when it takes that many already."""
    if context_length is None:
        return config
    if scaling not in ROPE_SCALINGS:
        raise ConfigError(
            f"rope scaling {scaling!r} is not supported; expected one of {', '.join(ROPE_SCALINGS)}"
        )
    text = config.get_text_config()
    trained = getattr(text, "max_position_embeddings", None)
    if not trained:
        raise ConfigError(
            f"model {model_name!r} states no max_position_embeddings; --context-length cannot extend it"
        )
    if context_length <= trained:
        return config
    rope = getattr(text, "rope_parameters", None)
    if not isinstance(rope, dict) or "rope_theta" not in rope:
        raise ConfigError(
            f"model {model_name!r} has no rotary position embeddings to rescale ({text.model_type}); "
            f"it takes at most {trained} tokens and --context-length {context_length} cannot extend it"
        )
    if rope.get("rope_type", "default") != "default":
        raise ConfigError(
            f"model {model_name!r} already scales its RoPE ({rope['rope_type']}, "
            f"{trained} positions); --context-length {context_length} does not rescale it again"
        )
    scaled = {**rope, "rope_type": scaling, "factor": context_length / trained}
    if scaling == "yarn":  # yarn alone reads the trained length from here
        scaled["original_max_position_embeddings"] = trained
    text.rope_parameters = scaled
    text.max_position_embeddings = context_length
    return config
