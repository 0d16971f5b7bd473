"""The built-in tiny models' tokenizer: a small byte-level BPE trained deterministically on a fixed
corpus, with the ChatML and Llama-3 special tokens so every chat renderer can run on a tiny model.

`scripts/make_tiny_models.py` calls `write_tiny_tokenizer_files` to (re)write the committed files in
`kitchen/adapters/local/model/tiny/`; a test checks that training again gives the same vocabulary.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

TINY_VOCAB_SIZE = 1536
CORPUS_SEED = 20240601
PRETOKENIZE_REGEX = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
    r"""|\s*[\r\n]+|\s+(?!\S)|\s+"""
)

# Order fixes the ids: <|endoftext|> is 0, <|pad|> is 8.
SPECIAL_TOKENS = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|begin_of_text|>",
    "<|end_of_text|>",
    "<|start_header_id|>",
    "<|end_header_id|>",
    "<|eot_id|>",
    "<|pad|>",
]

CHAT_TEMPLATES = {
    "chatml": (
        "{% for message in messages %}"
        "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
        "{% endfor %}"
        "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
    ),
    "llama3": (
        "{{ '<|begin_of_text|>' }}"
        "{% for message in messages %}"
        "{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'"
        " + message['content'] + '<|eot_id|>' }}"
        "{% endfor %}"
        "{% if add_generation_prompt %}"
        "{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}"
        "{% endif %}"
    ),
}

_PROSE = """\
The kitchen opens before sunrise, when the ovens are still cold and the bread dough has risen overnight.
A good recipe lists every ingredient, the order of the steps, and how long each step should take.
Machine learning models learn from examples: they predict the next word and adjust their weights.
Supervised fine-tuning teaches a model to answer like the examples in a dataset of conversations.
Reinforcement learning rewards the answers that pass a check, such as a correct sum or a passing test.
Preference learning compares two answers to the same question and prefers the one a person liked more.
Distillation trains a small student model to imitate the answers of a larger teacher model.
The user asked a question, and the assistant answered politely, briefly, and correctly.
Please write a short poem about the sea. The waves roll in, the gulls cry, the tide goes out again.
Summarize the following text in one sentence. Translate this sentence into French. Explain why.
What is the capital of France? The capital of France is Paris. What is the largest planet? Jupiter.
Water boils at one hundred degrees Celsius at sea level, and freezes at zero degrees.
There are seven days in a week, twelve months in a year, and twenty-four hours in a day.
She walked to the market, bought three apples and two loaves of bread, and came home by noon.
If it rains tomorrow, we will stay inside and read; otherwise, we will go for a long walk.
Learning rate, batch size, and the number of steps are the most important training settings.
A checkpoint saves the model weights and the optimizer state so that training can resume later.
The loss went down steadily during training, and the accuracy on the test set went up.
Think step by step. First, read the problem carefully. Then, write down what is known.
Let me check the answer again. Yes, the result is correct. The final answer is shown in a box.
Hello! How can I help you today? Thank you very much. You are welcome. Goodbye, and have a nice day.
I am sorry, but I cannot help with that request. Is there anything else I can do for you?
The quick brown fox jumps over the lazy dog. Pack my box with five dozen liquor jugs.
Numbers: 0 1 2 3 4 5 6 7 8 9 10 11 12 100 1000 2024 3.14 -7 +5 50% $20 #1 @home a_b a-b a/b.
Punctuation: , . ; : ! ? ' " ( ) [ ] { } < > = + - * / \\ | & ^ % ~ ` _ # @ $.
"""

_CODE = """\
def add(a, b):
    return a + b


def is_prime(n: int) -> bool:
    if n < 2:
        return False
    for k in range(2, int(n ** 0.5) + 1):
        if n % k == 0:
            return False
    return True


class Counter:
    def __init__(self):
        self.count = 0

    def increment(self):
        self.count += 1
        return self.count


numbers = [3, 1, 4, 1, 5, 9, 2, 6]
print(sorted(numbers), sum(numbers), max(numbers))
assert add(2, 3) == 5
import json
data = json.loads('{"name": "kitchen", "steps": 10}')
for key, value in data.items():
    print(f"{key}: {value}")
"""


def tiny_corpus() -> Iterator[str]:
    """The fixed training text: prose, code, arithmetic Q&A and chat transcripts (seeded)."""
    rng = random.Random(CORPUS_SEED)
    yield from _PROSE.splitlines()
    yield _CODE
    for _ in range(400):
        a, b = rng.randint(0, 99), rng.randint(0, 99)
        op = rng.choice("+-*")
        answer = a + b if op == "+" else a - b if op == "-" else a * b
        yield f"What is {a} {op} {b}? {a} {op} {b} = {answer}. The answer is \\boxed{{{answer}}}."
    for line in _PROSE.splitlines()[:12]:
        yield f"<|im_start|>user\n{line}<|im_end|>\n<|im_start|>assistant\nSure. {line}<|im_end|>\n"
        yield (
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\n"
            f"{line}<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nOK.<|eot_id|>"
        )
        yield f"User: {line}\n\nAssistant: {line}\n\n"


def train_tiny_tokenizer(vocab_size: int = TINY_VOCAB_SIZE) -> Any:
    """Train the byte-level BPE on `tiny_corpus()`; same input, same `tokenizers` version, same vocab."""
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    # The Qwen2 pipeline (NFC, split regex, byte level): transformers rebuilds exactly this one for a
    # qwen2 model, so both tiny models tokenize identically; digits are single tokens (arithmetic).
    tokenizer.normalizer = normalizers.NFC()
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(PRETOKENIZE_REGEX), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(tiny_corpus(), trainer)
    return tokenizer


def write_tiny_tokenizer_files(folder: Path) -> None:
    """Write `tokenizer.json` and `chat_templates.json` (the files committed under `tiny/`)."""
    folder.mkdir(parents=True, exist_ok=True)
    train_tiny_tokenizer().save(str(folder / "tokenizer.json"), pretty=True)
    (folder / "chat_templates.json").write_text(json.dumps(CHAT_TEMPLATES, indent=2) + "\n")
