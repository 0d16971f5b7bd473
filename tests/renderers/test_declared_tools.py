"""Conversations that declare tools render as tinker-cookbook 0.6.1 renders them.

The golden cases check the tool-declaring messages themselves; formats that move those
messages elsewhere (DeepSeek V4.1 folds them into the system turn) or change how history is
rendered when tools are declared are checked here, whole, against tinker-cookbook itself; so is
GLM-5.3's clear_thinking option, which no renderer name selects.
"""

from __future__ import annotations

import warnings
from typing import Any

import pytest

from tests.renderers.harness import CONVERSATIONS, TOOLS, run_case
from train_core.renderers import ToolCall, get_renderer

RENDERERS = [
    "kimi_k25",
    "kimi_k26_preserve_thinking",
    "deepseekv4_1",
    "deepseekv4_1_disable_thinking",
    "deepseekv4_1_preserve_thinking",
    "glm5_3_max_reasoning",
    "glm5_3_low_reasoning",
]
CONVERSATION_NAMES = ["tool_use", "thinking_history", "parallel_tool_results"]


def _with_tools(renderer: Any, name: str, system_prompt: str) -> list[dict[str, Any]]:
    conversation = [m for m in CONVERSATIONS[name] if m["role"] != "system"]
    prefix = renderer.create_conversation_prefix_with_tools(TOOLS, system_prompt)
    return [dict(m) for m in prefix] + conversation


@pytest.mark.parametrize("system_prompt", ["", "Be brief."])
@pytest.mark.parametrize("conversation", CONVERSATION_NAMES)
@pytest.mark.parametrize("name", RENDERERS)
def test_conversation_with_declared_tools_matches_tinker_cookbook(
    test_tokenizer: Any, name: str, conversation: str, system_prompt: str
) -> None:
    reference = pytest.importorskip(
        "tinker_cookbook.renderers", reason="tinker-cookbook 0.6.1 not installed"
    )
    from tinker_cookbook.renderers.base import ToolCall as ReferenceToolCall

    ours = get_renderer(name, test_tokenizer)
    theirs = reference.get_renderer(name, test_tokenizer)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = run_case(ours, _with_tools(ours, conversation, system_prompt), ToolCall)
        want = run_case(theirs, _with_tools(theirs, conversation, system_prompt), ReferenceToolCall)
    assert got["tokens"] != {"error": True}
    assert got == want


@pytest.mark.parametrize("conversation", ["thinking_history", "parallel_tool_results"])
def test_glm5_3_clear_thinking_matches_tinker_cookbook(
    test_tokenizer: Any, conversation: str
) -> None:
    pytest.importorskip("tinker_cookbook.renderers", reason="tinker-cookbook 0.6.1 not installed")
    from tinker_cookbook.renderers.base import ToolCall as ReferenceToolCall
    from tinker_cookbook.renderers.glm5_3 import Glm5_3Renderer as Reference

    from train_core.renderers.glm5_3 import Glm5_3Renderer

    ours = Glm5_3Renderer(test_tokenizer, strip_thinking_from_history=True)
    theirs = Reference(test_tokenizer, strip_thinking_from_history=True)
    got = run_case(ours, CONVERSATIONS[conversation], ToolCall)
    assert got == run_case(theirs, CONVERSATIONS[conversation], ReferenceToolCall)
    assert got != run_case(Glm5_3Renderer(test_tokenizer), CONVERSATIONS[conversation], ToolCall)
