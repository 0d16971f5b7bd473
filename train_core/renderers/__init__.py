"""Chat renderers: conversations -> tokens and loss weights, sampled tokens -> messages.

Token-for-token compatible with tinker-cookbook 0.6.1's renderers of the same names.

    renderer = get_renderer("qwen3", tokenizer)
    prompt = renderer.build_generation_prompt(messages)                     # tinker.ModelInput
    model_input, weights = renderer.build_supervised_example(
        messages, train_on_what=TrainOnWhat.LAST_ASSISTANT_MESSAGE)         # weights: float32 np array
    message, termination = renderer.parse_response(sampled_tokens)         # ParseTermination

A model with no built-in format but a chat template in its tokenizer: `get_renderer("hf_template",
tokenizer)`; `get_recommended_renderer_name(model_name)` picks the format from the model name.
"""

from train_core.renderers import types
from train_core.renderers.base import (
    Renderer,
    encode_without_special_tokens,
    parse_response_for_stop_token,
)
from train_core.renderers.by_name import (
    RendererFactory,
    builtin_renderer_names,
    get_registered_renderer_names,
    get_renderer,
    is_renderer_registered,
    register_renderer,
    resolve_renderer_name,
    unregister_renderer,
)
from train_core.renderers.content import (
    UNTERMINATED_TOOL_BLOCK_ERROR,
    classify_parse_failure,
    detect_unterminated_tool_block,
    ensure_list,
    ensure_text,
    format_content_as_string,
    get_text_content,
    has_thinking,
    parse_content_blocks,
    parse_think_blocks,
    remove_thinking,
)
from train_core.renderers.hf_template import HFTemplateRenderer
from train_core.renderers.recommended import (
    get_recommended_renderer_name,
    get_recommended_renderer_names,
)
from train_core.renderers.types import *  # noqa: F403  (listed in types.__all__)

__all__ = [
    "UNTERMINATED_TOOL_BLOCK_ERROR",
    "HFTemplateRenderer",
    "Renderer",
    "RendererFactory",
    "builtin_renderer_names",
    "classify_parse_failure",
    "detect_unterminated_tool_block",
    "encode_without_special_tokens",
    "ensure_list",
    "ensure_text",
    "format_content_as_string",
    "get_recommended_renderer_name",
    "get_recommended_renderer_names",
    "get_registered_renderer_names",
    "get_renderer",
    "get_text_content",
    "has_thinking",
    "is_renderer_registered",
    "parse_content_blocks",
    "parse_response_for_stop_token",
    "parse_think_blocks",
    "register_renderer",
    "remove_thinking",
    "resolve_renderer_name",
    "unregister_renderer",
]
__all__ += types.__all__
