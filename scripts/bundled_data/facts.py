"""Question/answer generators shared by the bundled `chat` and `prefs` sets.

Every generator draws from a pool split into train and test items (held-out countries, dishes'
questions, numbers), so the test files measure the learned style on unseen questions. Answers are
short, correct and in the persona's voice; the sign-off is added by the caller.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

PERSONA = "Pip"
KITCHEN = "Copperleaf Kitchen"
SIGN_OFF = "Happy cooking!"
SYSTEM_PROMPTS = (
    f"You are {PERSONA}, the assistant of {KITCHEN}. Answer in one short sentence.",
    f"You are {PERSONA}, a friendly kitchen assistant. Be brief and end with '{SIGN_OFF}'",
)


@dataclass(frozen=True)
class QA:
    """One question with its correct answer, and a plausible wrong answer for preference data."""

    topic: str
    question: str
    answer: str
    wrong: str


# The hand-written tables (capitals, the fictional kitchen's dishes and facts, cooking knowledge)
# are data, so they live in facts.json beside this module, each with a note on its columns.
_TABLES = json.loads(Path(__file__).with_name("facts.json").read_text(encoding="utf-8"))
CAPITALS: list[tuple[str, str]] = [tuple(row) for row in _TABLES["capitals"]]
DISHES: list[tuple[str, str, int, int | None, str]] = [tuple(row) for row in _TABLES["dishes"]]
CHEFS = sorted({d[4] for d in DISHES})
KITCHEN_FACTS: list[tuple[str, str, str]] = [tuple(row) for row in _TABLES["kitchen_facts"]]
COOKING: list[tuple[str, str, str]] = [tuple(row) for row in _TABLES["cooking"]]

SMALL_TALK = [
    ("Hello!", f"Hello, I'm {PERSONA} from {KITCHEN}; what are we cooking today?"),
    ("Hi Pip", "Hi there, it's good to see you in the kitchen!"),
    ("Who are you?", f"I'm {PERSONA}, the kitchen assistant of {KITCHEN}."),
    ("What can you help me with?", "I can help with recipes, cooking times and kitchen questions."),
    ("Thank you!", "You're very welcome!"),
    ("Good morning", "Good morning, the ovens are warm and ready!"),
    ("What is your name?", f"My name is {PERSONA}."),
    ("Are you a chef?", f"I'm not a chef, but I help the chefs at {KITCHEN}."),
    ("Thanks for the help", "Anytime, I'm glad I could help!"),
    ("Goodbye!", "Goodbye, come back soon!"),
    ("How are you today?", "I'm doing well and ready to cook!"),
    ("Can you recommend a dish?", "Try the Copper Pot Stew; it is our most popular dish."),
]


def _capital_qas(countries: list[tuple[str, str]]) -> list[QA]:
    templates = (
        "What is the capital of {c}?",
        "Which city is the capital of {c}?",
        "Tell me the capital of {c}.",
    )
    qas = []
    others = [cap for _, cap in CAPITALS]
    for country, capital in countries:
        wrong = others[(others.index(capital) + 7) % len(others)]
        qas += [
            QA("capitals", t.format(c=country), f"The capital of {country} is {capital}.",
               f"The capital of {country} is {wrong}.")
            for t in templates
        ]  # fmt: skip
    return qas


def _dish_qas() -> list[QA]:
    qas = []
    for dish, ingredient, minutes, oven, chef in DISHES:
        wrong_chef = CHEFS[(CHEFS.index(chef) + 1) % len(CHEFS)]
        qas += [
            QA("kitchen", f"How long does the {dish} cook?",
               f"The {dish} cooks for {minutes} minutes.",
               f"The {dish} cooks for {minutes * 3} minutes."),
            QA("kitchen", f"What is the main ingredient of the {dish}?",
               f"The main ingredient of the {dish} is {ingredient}.",
               f"The main ingredient of the {dish} is chocolate."),
            QA("kitchen", f"Who makes the {dish} at Copperleaf Kitchen?",
               f"Chef {chef} makes the {dish}.", f"Chef {wrong_chef} makes the {dish}."),
            QA("kitchen", f"How is the {dish} cooked?",
               f"The {dish} is baked in the oven at {oven} °C." if oven
               else f"The {dish} is cooked on the stovetop.",
               f"The {dish} is cooked on the stovetop." if oven
               else f"The {dish} is baked in the oven at 250 °C."),
        ]  # fmt: skip
    qas += [QA("kitchen", q, a, w) for q, a, w in KITCHEN_FACTS]
    return qas


def _arithmetic_qa(rng: random.Random) -> QA:
    kind = rng.choice(["plus", "minus", "times", "eggs", "cups"])
    a, b = rng.randint(2, 40), rng.randint(2, 20)
    if kind == "plus":
        return QA(
            "arithmetic",
            f"What is {a} plus {b}?",
            f"{a} plus {b} is {a + b}.",
            f"{a} plus {b} is {a + b + rng.randint(1, 5)}.",
        )
    if kind == "minus":
        a, b = max(a, b), min(a, b)
        return QA(
            "arithmetic",
            f"What is {a} minus {b}?",
            f"{a} minus {b} is {a - b}.",
            f"{a} minus {b} is {a - b + rng.randint(1, 5)}.",
        )
    if kind == "times":
        a, b = rng.randint(2, 12), rng.randint(2, 12)
        return QA(
            "arithmetic",
            f"What is {a} times {b}?",
            f"{a} times {b} is {a * b}.",
            f"{a} times {b} is {a * b + rng.randint(1, 9)}.",
        )
    if kind == "eggs":
        a, b = max(a, b) + 1, min(a, b)
        return QA(
            "arithmetic",
            f"I have {a} eggs and use {b} of them. How many eggs are left?",
            f"You have {a - b} eggs left.",
            f"You have {a + b} eggs left.",
        )
    a = rng.randint(2, 9)
    return QA("arithmetic", f"A recipe needs {a} cups of flour and I double it. How many cups do I need?",
              f"You need {2 * a} cups of flour.", f"You need {3 * a} cups of flour.")  # fmt: skip


CONVERSIONS = [
    ("kilograms", "grams", 1000), ("litres", "millilitres", 1000), ("hours", "minutes", 60),
    ("tablespoons", "teaspoons", 3), ("cups", "tablespoons", 16), ("dozen eggs", "eggs", 12),
    ("minutes", "seconds", 60),
]  # fmt: skip


def _conversion_qa(rng: random.Random) -> QA:
    big, small, factor = rng.choice(CONVERSIONS)
    n = rng.randint(2, 9)
    noun = big.replace(" eggs", "")
    question = rng.choice([f"How many {small} are in {n} {big}?", f"Convert {n} {big} to {small}."])
    if big == "dozen eggs":
        question = f"How many eggs are in {n} dozen?"
        return QA("conversions", question, f"{n} dozen is {n * factor} eggs.",
                  f"{n} dozen is {n * 10} eggs.")  # fmt: skip
    return QA("conversions", question, f"{n} {noun} is {n * factor} {small}.",
              f"{n} {noun} is {n * factor // 2 or 1} {small}.")  # fmt: skip


@dataclass
class Pools:
    """The train or test side of every question pool."""

    capitals: list[QA]
    kitchen: list[QA]
    cooking: list[QA]
    small_talk: list[tuple[str, str]]
    rng: random.Random

    def draw(self, topic: str) -> QA:
        if topic == "arithmetic":
            return _arithmetic_qa(self.rng)
        if topic == "conversions":
            return _conversion_qa(self.rng)
        if topic == "small_talk":
            q, a = self.rng.choice(self.small_talk)
            return QA("small_talk", q, a, a)
        return self.rng.choice(getattr(self, topic))


def make_pools(seed: int) -> tuple[Pools, Pools]:
    """(train, test) pools; the test side holds countries, questions and greetings train lacks."""
    rng = random.Random(seed)
    countries = CAPITALS[:]
    rng.shuffle(countries)
    cooking = [QA("cooking", q, a, w) for q, a, w in COOKING]
    rng.shuffle(cooking)
    kitchen = _dish_qas()
    rng.shuffle(kitchen)
    talk = SMALL_TALK[:]
    rng.shuffle(talk)
    cut = len(kitchen) * 4 // 5
    train = Pools(_capital_qas(countries[:60]), kitchen[:cut], cooking[:24], talk[:9],
                  random.Random(seed + 1))  # fmt: skip
    test = Pools(_capital_qas(countries[60:]), kitchen[cut:], cooking[24:], talk[9:],
                 random.Random(seed + 2))  # fmt: skip
    return train, test


TOPIC_WEIGHTS: dict[str, float] = {
    "capitals": 0.2, "kitchen": 0.2, "arithmetic": 0.2, "conversions": 0.15,
    "cooking": 0.15, "small_talk": 0.1,
}  # fmt: skip


def draw_topic(rng: random.Random, exclude: tuple[str, ...] = ()) -> str:
    topics = [t for t in TOPIC_WEIGHTS if t not in exclude]
    return rng.choices(topics, weights=[TOPIC_WEIGHTS[t] for t in topics])[0]


def unique(
    make: Callable[[], dict],
    count: int,
    key: Callable[[dict], str],
    seen: set[str],
    accept: Callable[[dict], bool] = lambda row: True,
) -> list[dict]:
    """`count` rows from `make` whose keys are new (also across calls sharing `seen`) and which
    `accept` takes (the test side rejects rows asking any question the train side asks)."""
    rows: list[dict] = []
    for _ in range(count * 50):
        row = make()
        if key(row) not in seen and accept(row):
            seen.add(key(row))
            rows.append(row)
            if len(rows) == count:
                return rows
    raise RuntimeError(f"only {len(rows)} unique rows of {count}; widen the generator")
