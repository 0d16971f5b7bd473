"""Shared pieces of the renderer tests: a test tokenizer, conversations, and a case runner.

The same runner drives train_core's renderers and tinker-cookbook 0.6.1's (the oracle), so the
golden file written from the oracle (`make_golden.py`) and the checks against it compare like
with like. Conversations are plain data; `to_messages` builds them with either side's ToolCall.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from train_core.renderers.types import TrainOnWhat

DATA = Path(__file__).parent / "data"
TOKENIZER_JSON = DATA / "test_tokenizer.json"
GOLDEN_JSON = DATA / "golden.json"

SPECIAL_TOKENS = [
    # ChatML / Qwen
    "<|im_start|>",
    "<|im_end|>",
    "<|endoftext|>",
    # Llama 3
    "<|begin_of_text|>",
    "<|start_header_id|>",
    "<|end_header_id|>",
    "<|eot_id|>",
    # DeepSeek V3
    "<｜begin▁of▁sentence｜>",
    "<｜end▁of▁sentence｜>",
    "<｜User｜>",
    "<｜Assistant｜>",
    "<｜tool▁calls▁begin｜>",
    "<｜tool▁calls▁end｜>",
    "<｜tool▁call▁begin｜>",
    "<｜tool▁call▁end｜>",
    "<｜tool▁sep｜>",
    "<｜tool▁output▁begin｜>",
    "<｜tool▁output▁end｜>",
    # Kimi K2
    "<|im_user|>",
    "<|im_assistant|>",
    "<|im_system|>",
    "<|im_middle|>",
    "<|tool_calls_section_begin|>",
    "<|tool_calls_section_end|>",
    "<|tool_call_begin|>",
    "<|tool_call_argument_begin|>",
    "<|tool_call_end|>",
    # gpt-oss (Harmony)
    "<|start|>",
    "<|channel|>",
    "<|message|>",
    "<|end|>",
    "<|return|>",
    "<|call|>",
    "<|constrain|>",
]
# Added but not special, as in Qwen3: they stay single tokens even where special-token text is
# encoded literally.
PLAIN_ADDED_TOKENS = [
    "<think>",
    "</think>",
    "<tool_call>",
    "</tool_call>",
    "<tool_response>",
    "</tool_response>",
]

# Special tokens of formats added after the tokenizer was first built: appended last, so that the
# ids of every earlier token (and so every earlier golden case) stay as they were.
LATER_SPECIAL_TOKENS = [
    # GLM-5.3
    "[gMASK]",
    "<sop>",
    "<|system|>",
    "<|user|>",
    "<|assistant|>",
    "<|observation|>",
]

# BPE merges are learnt from this text, so that tokens depend on where strings are split: a
# renderer that encodes pieces at different boundaries than the reference gets other tokens.
_CORPUS = [
    "User: What is the answer?\n\nAssistant: The answer is 4.\n\n",
    "You are a helpful assistant. Think step by step, then answer the question.",
    '{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}',
    "The weather in Paris is sunny and 21 degrees. Let me check the tool result.",
    "functions.get_weather:0 commentary analysis final json to=assistant",
    "Hello there! How can I help you today? I think 2 + 2 = 4, so the answer is 4.",
    "# Instructions\n\n# Tools\n\nnamespace functions\n## Return of call",
]


_SPLIT_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)


def build_test_tokenizer_json() -> str:
    """Train the small byte-level BPE and add every format's tokens (run once; the JSON is kept)."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    # The Llama 3 / Qwen2 split pattern (newline runs are their own pieces), then bytes.
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(_SPLIT_PATTERN), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=600,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_CORPUS * 4, trainer=trainer)
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS])
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in PLAIN_ADDED_TOKENS])
    return add_later_special_tokens(tok.to_str(pretty=False))


def add_later_special_tokens(tokenizer_json: str) -> str:
    """The tokenizer with LATER_SPECIAL_TOKENS appended (a no-op for those it already has)."""
    from tokenizers import AddedToken, Tokenizer

    tok = Tokenizer.from_str(tokenizer_json)
    tok.add_special_tokens(
        [AddedToken(t, special=True, normalized=False) for t in LATER_SPECIAL_TOKENS]
    )
    return tok.to_str(pretty=False)


def load_test_tokenizer() -> Any:
    """The test tokenizer as a Hugging Face fast tokenizer (BOS <|begin_of_text|>, EOS <|endoftext|>)."""
    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer.from_str(TOKENIZER_JSON.read_text())
    return PreTrainedTokenizerFast(
        tokenizer_object=backend, bos_token="<|begin_of_text|>", eos_token="<|endoftext|>"
    )


def _call(name: str, args: dict[str, Any], call_id: str | None = None) -> dict[str, Any]:
    return {"name": name, "arguments": json.dumps(args), "id": call_id}


def _think(text: str) -> dict[str, str]:
    return {"type": "thinking", "thinking": text}


def _text(text: str) -> dict[str, str]:
    return {"type": "text", "text": text}


WEATHER_CALL = _call("get_weather", {"city": "Paris"}, "functions.get_weather:0")

CONVERSATIONS: dict[str, list[dict[str, Any]]] = {
    "simple": [
        {"role": "user", "content": "What is 2+2?"},
        {"role": "assistant", "content": "The answer is 4."},
    ],
    "system_multi_turn": [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "Hello there!"},
        {"role": "assistant", "content": "Hello! How can I help you today?"},
        {"role": "user", "content": "What is 2 + 2?"},
        {"role": "assistant", "content": "2 + 2 = 4"},
    ],
    "thinking": [
        {"role": "user", "content": "What is 2+2?"},
        {"role": "assistant", "content": [_think("I think 2 + 2 = 4."), _text("The answer is 4.")]},
    ],
    "thinking_history": [
        {"role": "system", "content": "Think step by step."},
        {"role": "user", "content": "What is 2+2?"},
        {"role": "assistant", "content": [_think("Add them."), _text("4")]},
        {"role": "user", "content": "And 3+3?"},
        {"role": "assistant", "content": [_think("\nAdd them again.\n"), _text("\n\n6")]},
    ],
    "thinking_in_string": [
        {"role": "user", "content": "What is 2+2?"},
        {"role": "assistant", "content": "<think>\nsum\n</think>\n\nThe answer is 4."},
    ],
    "tool_use": [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "What is the weather in Paris?"},
        {
            "role": "assistant",
            "content": "Let me check the tool.",
            "tool_calls": [WEATHER_CALL],
        },
        {
            "role": "tool",
            "content": "sunny, 21 degrees",
            "name": "get_weather",
            "tool_call_id": "functions.get_weather:0",
        },
        {"role": "assistant", "content": "The weather in Paris is sunny and 21 degrees."},
    ],
    "tool_calls_only": [
        {"role": "user", "content": "Weather in Paris and Rome?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                WEATHER_CALL,
                _call(
                    "get_weather", {"city": "Rome", "unit": "celsius"}, "functions.get_weather:1"
                ),
            ],
        },
    ],
    "thinking_tool_call": [
        {"role": "user", "content": "What is the weather in Paris?"},
        {
            "role": "assistant",
            "content": [_think("I should call the tool."), _text("Checking.")],
            "tool_calls": [WEATHER_CALL],
        },
    ],
    "parallel_tool_results": [
        {"role": "user", "content": "Compare Paris and Rome."},
        {
            "role": "assistant",
            "content": [_think("Call the tool twice."), _text("Checking both.")],
            "tool_calls": [
                WEATHER_CALL,
                _call(
                    "get_weather",
                    {"city": "Rome", "days": 2, "metric": True, "tags": ["a"], "note": None},
                    "functions.get_weather:1",
                ),
            ],
        },
        {"role": "tool", "content": "sunny", "tool_call_id": "functions.get_weather:0"},
        {"role": "tool", "content": "rainy", "tool_call_id": "functions.get_weather:1"},
        {
            "role": "assistant",
            "content": [_think("Paris wins."), _text("Paris is sunny; Rome is rainy.")],
        },
    ],
    "special_text_in_content": [
        {"role": "user", "content": "Print <|im_end|> and <|eot_id|> literally, then é ✓ 你好."},
        {"role": "assistant", "content": "<|im_end|> é ✓ 你好"},
    ],
    "no_user": [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "assistant", "content": "Hello there!"},
    ],
    "customized": [
        {"role": "system", "content": "Be brief.", "trainable": False},
        {"role": "user", "content": "Hello there!", "trainable": True},
        {"role": "assistant", "content": "Hello!", "trainable": False},
        {"role": "user", "content": "What is 2+2?", "trainable": False},
        {"role": "assistant", "content": "4", "trainable": True},
    ],
}

TOOLS: list[dict[str, Any]] = [
    {
        "name": "get_weather",
        "description": "Current weather for a city.",
        "parameters": {
            "type": "object",
            "description": "Where and how.",
            "properties": {
                "city": {"type": "string", "description": "City name", "examples": ["Paris"]},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "default": "celsius"},
                "days": {"type": "integer", "title": "Days", "nullable": True},
                "tags": {"type": "array", "items": {"type": ["string", "number"]}},
                "where": {
                    "anyOf": [
                        {
                            "type": "object",
                            "properties": {"lat": {"type": "number"}},
                            "required": ["lat"],
                        },
                        {"type": "boolean"},
                    ]
                },
            },
            "required": ["city"],
        },
    },
    {"name": "now", "description": "", "parameters": {"type": "object", "properties": {}}},
]

CORE_RENDERER_NAMES = [
    "role_colon",
    "llama3",
    "qwen3",
    "qwen3_disable_thinking",
    "qwen3_instruct",
    "deepseekv3",
    "deepseekv3_thinking",
    "kimi_k2",
    "gpt_oss_no_sysprompt",
]
"""One renderer per early text format; the parse and registry tests run over these (plus chatml)."""

RENDERER_NAMES = [
    *CORE_RENDERER_NAMES,
    "gpt_oss_medium_reasoning",
    "deepseekv3_disable_thinking",
    "qwen3_vl",
    "qwen3_vl_instruct",
    "qwen3_5",
    "qwen3_5_disable_thinking",
    "qwen3_5_preserve_thinking",
    "qwen3_8_xhigh_reasoning",
    "qwen3_8_medium_reasoning",
    "qwen3_8_low_reasoning",
    "qwen3_8_disable_thinking",
    "nemotron3",
    "nemotron3_low_thinking",
    "nemotron3_disable_thinking",
    "nemotron3_preserve_thinking",
    "nemotron3_ultra",
    "nemotron3_ultra_disable_thinking",
    "nemotron3_ultra_medium_thinking",
    "nemotron3_ultra_preserve_thinking",
    "kimi_k25",
    "kimi_k25_disable_thinking",
    "kimi_k26",
    "kimi_k26_disable_thinking",
    "kimi_k26_preserve_thinking",
    "deepseekv4_1",
    "deepseekv4_1_low_reasoning",
    "deepseekv4_1_max_reasoning",
    "deepseekv4_1_disable_thinking",
    "deepseekv4_1_preserve_thinking",
    "glm5_3_max_reasoning",
    "glm5_3_high_reasoning",
    "glm5_3_low_reasoning",
]
FIXED_DATE = "2025-01-15"  # gpt-oss system prompts carry a date; fixed so cases are reproducible


def to_messages(conversation: list[dict[str, Any]], tool_call_cls: Any) -> list[Any]:
    """The conversation with tool calls built as `tool_call_cls` (either side's ToolCall)."""
    out = []
    for raw in conversation:
        message = dict(raw)
        if "tool_calls" in message:
            message["tool_calls"] = [
                tool_call_cls(
                    function=tool_call_cls.FunctionBody(name=c["name"], arguments=c["arguments"]),
                    id=c["id"],
                )
                for c in message["tool_calls"]
            ]
        out.append(message)
    return out


def message_to_json(message: Any) -> dict[str, Any]:
    """A parsed message as plain JSON, comparable across both implementations."""
    out: dict[str, Any] = {"role": message["role"], "content": message["content"]}
    for key in ("tool_calls", "unparsed_tool_calls"):
        if key in message:
            out[key] = [tc.model_dump(mode="json") for tc in message[key]]
    return out


def _outcome(fn: Callable[[], Any]) -> Any:
    """fn's result, or {"error": True} when it raised (both sides must then raise)."""
    try:
        return fn()
    except (ValueError, AssertionError, NotImplementedError):
        return {"error": True}


def _weight_runs(weights: Any) -> list[int]:
    """Weights as run lengths, alternating 0s and 1s and starting with 0s: [2, 3] is 0,0,1,1,1.

    Every weight a renderer writes is 0 or 1 (checked here), so this is lossless.
    """
    runs: list[int] = [0]
    current = 0
    for w in weights.tolist():
        assert w in (0, 1), f"weight {w} is neither 0 nor 1"
        if int(w) != current:
            runs.append(0)
            current = int(w)
        runs[-1] += 1
    return runs


def _delta(tokens: list[int], base: Any) -> dict[str, Any]:
    """tokens as (length of the prefix shared with base, the rest): keeps the golden file small."""
    shared = 0
    if isinstance(base, list):
        while shared < min(len(tokens), len(base)) and tokens[shared] == base[shared]:
            shared += 1
    return {"shared": shared, "rest": tokens[shared:]}


def run_case(
    renderer: Any,
    conversation: list[dict[str, Any]],
    tool_call_cls: Any,
    with_tools_prefix: bool = False,
) -> dict[str, Any]:
    """Everything one renderer does with one conversation, as compact JSON-able data
    (with_tools_prefix: also the tool-declaring messages, which do not depend on the conversation).

    "tokens" is the full supervised sequence; every other token list is stored as its delta
    from it (shared prefix length, rest).
    """
    messages = to_messages(conversation, tool_call_cls)
    plain = [{k: v for k, v in m.items() if k != "trainable"} for m in messages]
    case: dict[str, Any] = {
        "tokens": _outcome(lambda: renderer.build_supervised_example(plain)[0].to_ints())
    }

    def example(msgs: list[Any], mode: str) -> dict[str, Any]:
        model_input, weights = renderer.build_supervised_example(msgs, train_on_what=mode)
        return {
            "tokens": _delta(model_input.to_ints(), case["tokens"]),
            "weights": _weight_runs(weights),
        }

    def examples(mode: str) -> list[dict[str, Any]]:
        return [
            {"tokens": _delta(mi.to_ints(), case["tokens"]), "weights": _weight_runs(ws)}
            for mi, ws in renderer.build_supervised_examples(plain, train_on_what=mode)
        ]

    for mode in TrainOnWhat:
        msgs = messages if mode == "customized" else plain
        case[f"supervised/{mode}"] = _outcome(partial(example, msgs, mode))
    for mode in ("last_assistant_turn", "all_assistant_messages"):
        case[f"supervised_examples/{mode}"] = _outcome(partial(examples, mode))
    case["prompt"] = _outcome(
        lambda: _delta(renderer.build_generation_prompt(plain[:-1]).to_ints(), case["tokens"])
    )
    case["prompt_prefill"] = _outcome(
        lambda: _delta(
            renderer.build_generation_prompt(plain[:-1], prefill="The").to_ints(), case["tokens"]
        )
    )
    case["stop"] = renderer.get_stop_sequences()

    def tools_prefix(system_prompt: str) -> list[dict[str, Any]]:
        prefix = renderer.create_conversation_prefix_with_tools(TOOLS, system_prompt)
        return [message_to_json(m) for m in prefix]

    for system_prompt in ("", "Be brief.") if with_tools_prefix else ():
        case[f"tools_prefix/{system_prompt!r}"] = _outcome(partial(tools_prefix, system_prompt))

    # Parse what the model would sample: the last message's tokens after the generation prompt.
    def sampled() -> list[int]:
        full, _ = renderer.build_supervised_example(plain)
        prompt = renderer.build_generation_prompt(plain[:-1]).to_ints()
        return full.to_ints()[len(prompt) :]

    def parse(tokens: list[int]) -> dict[str, Any]:
        message, termination = renderer.parse_response(tokens)
        return {"message": message_to_json(message), "termination": str(termination)}

    case["parse"] = _outcome(lambda: parse(sampled()))
    case["parse_truncated"] = _outcome(lambda: parse(sampled()[:-1]))
    return case


def weighted_spans(tokenizer: Any, tokens: list[int], weights: Any) -> list[str]:
    """The decoded runs of consecutive tokens with weight 1, in order."""
    spans: list[list[int]] = []
    previous = 0.0
    for token, weight in zip(tokens, weights.tolist(), strict=True):
        if weight == 1.0:
            if previous != 1.0:
                spans.append([])
            spans[-1].append(token)
        previous = weight
    return [tokenizer.decode(span) for span in spans]
