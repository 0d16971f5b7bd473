"""Decision rows with known odds: a fair die rolled above k (yes / no), and a marble's colour
drawn from a bag of counts (red / green / blue). "probs" holds the true odds (the soft label),
"answer" one drawn outcome (the hard label), so a model trained on either learns the odds."""

from __future__ import annotations

import random

COLOURS = ["red", "green", "blue"]


def _die(rng: random.Random) -> dict:
    k = rng.randint(1, 5)
    yes = round((6 - k) / 6, 6)
    return {
        "question": f"A fair six-sided die is rolled once. Will it show more than {k}?",
        "choices": [["yes", f"it shows more than {k}"], ["no", f"it shows {k} or less"]],
        "answer": "yes" if rng.randint(1, 6) > k else "no",
        "probs": {"yes": yes, "no": round(1 - yes, 6)},
    }


def _marbles(rng: random.Random) -> dict:
    counts = [rng.randint(0, 6) for _ in COLOURS]
    counts[0] += 1 if sum(counts) == 0 else 0
    total = sum(counts)
    probs = [round(c / total, 6) for c in counts]
    probs[-1] = round(1 - probs[0] - probs[1], 6)
    return {
        "question": (
            f"A bag holds {counts[0]} red, {counts[1]} green and {counts[2]} blue marbles. "
            "One marble is drawn at random. What colour is it?"
        ),
        "choices": [[c, f"a {c} marble"] for c in COLOURS],
        "answer": rng.choices(COLOURS, weights=counts)[0],
        "probs": dict(zip(COLOURS, probs, strict=True)),
    }


def make_decisions(seed: int, n_train: int, n_test: int) -> tuple[list[dict], list[dict]]:
    rng = random.Random(f"{seed}:decisions")
    rows = [(_die if i % 2 == 0 else _marbles)(rng) for i in range(n_train + n_test)]
    return rows[:n_train], rows[n_train:]
