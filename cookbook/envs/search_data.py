"""The bundled search task (bundled:search): passages about invented people and towns, and
questions whose answers only those passages hold. Every name is made of random syllables, so
no model knows an answer before it searches, and each name occurs in one passage only, so a
query naming the subject finds it. Splits: `passages` ({"id", "text"}), `train` and `test`
(Search-R1's row shape: {"question", "golden_answers", "data_source"}).

`write_bundled(folder)` writes the three files; the committed ones in cookbook/data are its
output (a test regenerates and compares them)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

SEED = 48
ONSETS = ["b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "th", "br", "kr",
          "st", "dr", "vel", "mor", "quen", "tal", "sor"]  # fmt: skip
VOWELS = ["a", "e", "i", "o", "u", "ae", "io", "ou"]
CODAS = ["", "", "n", "r", "l", "s", "th", "m", "sk", "nd"]
PROFESSIONS = ["inventor", "painter", "astronomer", "composer", "cartographer", "botanist",
               "architect", "poet", "engineer", "chemist"]  # fmt: skip
WORKS = ["lantern", "atlas", "engine", "garden", "symphony", "bridge", "telescope", "almanac",
         "loom", "compass"]  # fmt: skip
PEOPLE, TOWNS, TEST = 120, 80, 60


def _word(rng: random.Random, syllables: int) -> str:
    parts = [rng.choice(ONSETS) + rng.choice(VOWELS) + rng.choice(CODAS) for _ in range(syllables)]
    return "".join(parts).capitalize()


def _names(rng: random.Random, n: int, syllables: int, taken: set[str]) -> list[str]:
    out: list[str] = []
    while len(out) < n:
        name = _word(rng, syllables)
        if name.lower() not in taken and len(name) >= 4:
            taken.add(name.lower())
            out.append(name)
    return out


def generate(seed: int = SEED) -> dict[str, list[dict[str, Any]]]:
    rng = random.Random(seed)
    taken: set[str] = set()
    towns = _names(rng, TOWNS, 2, taken)
    rivers = _names(rng, TOWNS, 2, taken)
    firsts, lasts = _names(rng, PEOPLE, 2, taken), _names(rng, PEOPLE, 3, taken)
    titles = _names(rng, PEOPLE, 2, taken)
    passages, questions = [], []
    for i, (town, river) in enumerate(zip(towns, rivers, strict=True)):
        founded = rng.randint(1100, 1890)
        passages.append({"id": f"town-{i}", "text": f"{town} is a market town on the {river} "
                         f"river, founded in {founded}. Its people are known for their fairs."})  # fmt: skip
        questions.append({"question": f"On which river does the town of {town} lie?",
                          "golden_answers": [river, f"{river} river"], "data_source": "town"})  # fmt: skip
    for i in range(PEOPLE):
        name = f"{firsts[i]} {lasts[i]}"
        job, work, town = rng.choice(PROFESSIONS), rng.choice(WORKS), rng.choice(towns)
        work_name = f"{titles[i]} {work.capitalize()}"
        passages.append({"id": f"person-{i}", "text": f"{name} was a {job} born in {town}. "
                         f"{firsts[i]} is best remembered for the {work_name}."})  # fmt: skip
        questions.append({"question": f"In which town was the {job} {name} born?",
                          "golden_answers": [town], "data_source": "person"})  # fmt: skip
        questions.append({"question": f"What is {name} best remembered for?",
                          "golden_answers": [f"the {work_name}", work_name],
                          "data_source": "person"})  # fmt: skip
    rng.shuffle(questions)
    return {"passages": passages, "train": questions[TEST:], "test": questions[:TEST]}


FILES = {"passages": "search_passages.jsonl", "train": "search.jsonl", "test": "search_test.jsonl"}


def write_bundled(folder: Path, seed: int = SEED) -> list[Path]:
    written = []
    for split, rows in generate(seed).items():
        path = folder / FILES[split]
        with path.open("w", encoding="utf-8", newline="\n") as f:
            for row in rows:
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
        written.append(path)
    return written


if __name__ == "__main__":
    for path in write_bundled(Path(__file__).resolve().parents[1] / "data"):
        print(path)
