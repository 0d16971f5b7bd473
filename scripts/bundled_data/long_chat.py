"""The bundled `long_conversations` set: one long session with Pip per row, many short turns, and a
last turn that asks what the first question was, so the answer depends on the row's first tokens.

Train rows run from about 3k to 15k tokens (SmolLM2's tokenizer), to train and measure sequences past a
small model's trained context (`--context-length`, docs/memory.md); the test rows are short, so a
held-out pass stays cheap."""

from __future__ import annotations

import random

from bundled_data.chat import reply
from bundled_data.facts import SIGN_OFF, SYSTEM_PROMPTS, Pools, draw_topic, make_pools

# Characters of turns per row: about 2.5 of them a token on these short turns, chat template
# included (SmolLM2: 3k to 15k tokens for train, 1.6k and 2.4k for test).
TRAIN_CHARS = (7_500, 15_000, 22_500, 30_000, 37_500)
TEST_CHARS = (4_000, 6_000)


def session(pools: Pools, rng: random.Random, chars: int) -> dict:
    """Turns drawn from `pools` until the row holds about `chars` characters, then the recall turn."""
    messages = [{"role": "system", "content": rng.choice(SYSTEM_PROMPTS)}]
    first = None
    size = 0
    while size < chars:
        qa = pools.draw(draw_topic(rng, exclude=("small_talk",)))
        first = first or qa.question
        answer = reply(qa)
        messages += [
            {"role": "user", "content": qa.question},
            {"role": "assistant", "content": answer},
        ]
        size += len(qa.question) + len(answer)
    messages += [
        {"role": "user", "content": "What was the first question I asked you in this session?"},
        {"role": "assistant", "content": f'Your first question was "{first}" {SIGN_OFF}'},
    ]
    return {"messages": messages}


def make_long_chat(seed: int) -> tuple[list[dict], list[dict]]:
    train_pools, test_pools = make_pools(seed + 20)
    rng = random.Random(seed + 21)
    train = [session(train_pools, rng, chars) for chars in TRAIN_CHARS]
    test = [session(test_pools, rng, chars) for chars in TEST_CHARS]
    return train, test
